#!/usr/bin/env bash
# Builds a notebook-capable scientific Python image: the python-sci image
# (../python-sci/build.sh, the same suite) plus Debian's nbconvert and
# ipykernel (and the jupyter-nbconvert command), added as one layer over it from an apt.txt with
# `dotlab image build --base` (docs/howto-replication-package.md "The
# environment"): the python-sci layers are reused as they are, and only the
# new packages are installed (seconds once python-sci is built, instead of a
# debootstrap from nothing). A notebook then runs as the entrypoint
#
#   jupyter-nbconvert --to notebook --execute analysis.ipynb --output-dir /work/out
#
#   examples/images/python-notebook/build.sh [--suite bullseye|bookworm|trixie] [DOTLAB_BIN] [VAR_DIR]
#
# Prints "DIGEST<TAB>dotlab.example/python-notebook@DIGEST" on the last line
# (python-notebook-SUITE for another suite). The same base and package set
# again reuse the earlier build. Needs root, debootstrap (for python-sci),
# buildah and runc; the mirror is the one python-sci was built from.
set -euo pipefail
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"
dotlab_args "$@"

suite=()
if [ "$SUITE" != bookworm ]; then suite=(--suite "$SUITE"); fi
base=$(bash "$(dirname "$0")/../python-sci/build.sh" "${suite[@]}" "$dotlab" "$var" | tail -1 | cut -f2)
pkg=$(mktemp -d)
trap 'rm -rf "$pkg"' EXIT
printf '%s\n' jupyter-nbconvert python3-nbconvert python3-ipykernel >"$pkg/apt.txt"
# The mirror may be a local or private one (an apt proxy, a CI mirror):
# --allow-private-urls admits it to the build's egress list; the build
# steps still reach nothing else.
"$dotlab" image build --base "$base" "$pkg" --ref "$(dotlab_name dotlab.example/python-notebook)" \
  --cache "$var/cache" --debian-mirror "$(dotlab_mirror)" --allow-private-urls | tail -1
