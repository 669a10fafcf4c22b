#!/usr/bin/env bash
# Builds the example Python image used by examples/claims: Debian bookworm
# minbase + python3-minimal + libpython3.11-stdlib (json, statistics, csv…),
# trimmed, then packed deterministically with `dotlab image build` (sorted
# entries, fixed mtimes) and imported into the local image store.
#
#   examples/images/python/build.sh [DOTLAB_BIN] [VAR_DIR]
#
# The rootfs is cached in VAR_DIR/images/python-rootfs (about two minutes and
# 120 MB the first time; instant afterwards). Prints the image digest on the
# last line of standard output. Needs root and debootstrap (apt-get install
# debootstrap). The mirror is the first deb.debian.org-style URI in
# /etc/apt/sources.list(.d), else http://deb.debian.org/debian.
set -euo pipefail
dotlab=${1:-dotlab}
var=${2:-var}
rootfs="$var/images/python-rootfs"
mkdir -p "$var/images"

mirror=$(grep -hoE '^(deb|URIs:)\s+https?://[^ ]+' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
  | awk '{print $2}' | head -1 || true)
mirror=${mirror:-http://deb.debian.org/debian}

if [ ! -f "$rootfs/.dotlab-complete" ]; then
  echo "building the python rootfs with debootstrap from $mirror (about two minutes)…" >&2
  rm -rf "$rootfs" "$rootfs.tmp"
  debootstrap --variant=minbase --include=python3-minimal,libpython3.11-stdlib \
    bookworm "$rootfs.tmp" "$mirror" >&2
  # Trim what an analysis never needs and what varies between builds.
  rm -rf "$rootfs.tmp"/var/lib/apt/lists/* "$rootfs.tmp"/var/cache/apt/* \
         "$rootfs.tmp"/var/cache/debconf/*-old "$rootfs.tmp"/var/cache/ldconfig/* \
         "$rootfs.tmp"/usr/share/doc/* "$rootfs.tmp"/usr/share/man/* "$rootfs.tmp"/usr/share/info/* \
         "$rootfs.tmp"/usr/share/locale/* "$rootfs.tmp"/usr/share/zoneinfo/* \
         "$rootfs.tmp"/var/log/* "$rootfs.tmp"/var/lib/dpkg/*-old "$rootfs.tmp"/var/lib/dpkg/info/*.md5sums \
         "$rootfs.tmp"/etc/machine-id "$rootfs.tmp"/etc/hostname "$rootfs.tmp"/etc/resolv.conf \
         "$rootfs.tmp"/etc/*- "$rootfs.tmp"/var/lib/systemd/* "$rootfs.tmp"/debootstrap
  find "$rootfs.tmp" -name '__pycache__' -type d -prune -exec rm -rf {} +
  # Device nodes cannot go into an image; the runtime provides /dev.
  find "$rootfs.tmp/dev" -mindepth 1 -delete
  chmod 1777 "$rootfs.tmp/tmp"
  mkdir -p "$rootfs.tmp/work/code" "$rootfs.tmp/work/data" "$rootfs.tmp/work/out"
  touch "$rootfs.tmp/.dotlab-complete"
  mv "$rootfs.tmp" "$rootfs"
fi
find "$rootfs/dev" -mindepth 1 -delete 2>/dev/null || true
"$dotlab" image build "$rootfs" --ref dotlab.example/python --cache "$var/cache" | tail -1
