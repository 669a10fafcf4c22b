#!/usr/bin/env bash
# Builds the example Python image used by examples/claims: Debian bookworm
# minbase + python3-minimal + libpython3.X-stdlib (3.11 on bookworm; json, statistics, csv…),
# trimmed (zoneinfo and C.UTF-8 kept), then packed deterministically with
# `dotlab image build` (sorted entries, fixed mtimes, uncompressed layer) and
# imported into the local image store. The shared steps are in ../lib.sh.
#
#   examples/images/python/build.sh [--suite bullseye|bookworm|trixie] [DOTLAB_BIN] [VAR_DIR]
#
# The rootfs is cached in VAR_DIR/images/python-rootfs (about two minutes and
# 120 MB the first time; instant afterwards). Prints the image digest on the
# last line of standard output. Needs root and debootstrap (apt-get install
# debootstrap). The mirror is the first deb.debian.org-style URI in
# /etc/apt/sources.list(.d), else http://deb.debian.org/debian.
set -euo pipefail
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"
dotlab_args "$@"

RECIPE=python
RECIPE_VERSION=2 # 2: zoneinfo kept
INCLUDE=python3-minimal,libpython$PYVER-stdlib
PACKAGES=
dotlab_rootfs
dotlab_pack dotlab.example/python
