#!/usr/bin/env bash
# Builds a "-net" variant of a cached example image: the rootfs of BASE
# (python or r, built first by ../BASE/build.sh) copied, and the packages a
# replication package uses to fetch files by URL added with apt-get in a
# chroot: python3-requests for python, r-cran-httr for r. The sandbox's
# pinned downloads (docs/sandbox.md "Pinned downloads") are tested with
# them (examples/images/downloads_test.go). The shared steps are in ../lib.sh.
#
#   examples/images/net/build.sh BASE [DOTLAB_BIN] [VAR_DIR]
#
# The rootfs is cached in VAR_DIR/images/BASE-net-rootfs and rebuilt only
# when the base's rootfs or this recipe's version changes. Prints
# "DIGEST<TAB>dotlab.example/BASE-net@DIGEST" on the last line. Needs root.
set -euo pipefail
base=${1:?usage: net/build.sh python|r [DOTLAB_BIN] [VAR_DIR]}
dotlab=${2:-dotlab}
var=${3:-var}
here=$(dirname "$0")
# shellcheck source=../lib.sh
. "$here/../lib.sh"

case $base in
python) PACKAGES="python3-requests" ;;
r) PACKAGES="r-cran-httr" ;;
*) echo "net/build.sh: BASE must be python or r" >&2; exit 2 ;;
esac
# The base first (cached: a no-op when its rootfs is complete).
bash "$here/../$base/build.sh" "$dotlab" "$var" >/dev/null

RECIPE=$base-net
RECIPE_VERSION="1 on $(cat "$var/images/$base-rootfs/.dotlab-complete")"
rootfs="$var/images/$RECIPE-rootfs"
exec 9>"$var/images/.$RECIPE.lock"
flock 9
if ! [ -f "$rootfs/.dotlab-complete" ] || [ "$(cat "$rootfs/.dotlab-complete")" != "$RECIPE $RECIPE_VERSION" ]; then
  echo "building the $RECIPE rootfs: $base plus $PACKAGES…" >&2
  tmp="$rootfs.tmp"
  for d in "$rootfs" "$tmp"; do
    if mountpoint -q "$d/proc" 2>/dev/null; then umount "$d/proc" || umount -l "$d/proc"; fi
    rm -rf --one-file-system "$d"
  done
  cp -a "$var/images/$base-rootfs" "$tmp"
  rm -f "$tmp/.dotlab-complete"
  # The trim removed the device nodes, which apt's gpgv needs; the trim
  # below removes them again.
  find "$tmp/dev" -mindepth 1 -delete
  mknod -m 666 "$tmp/dev/null" c 1 3
  mknod -m 666 "$tmp/dev/zero" c 1 5
  mknod -m 666 "$tmp/dev/urandom" c 1 9
  # shellcheck disable=SC2086 # PACKAGES is a word list
  dotlab_chroot_apt "$tmp" $PACKAGES >&2
  dotlab_trim "$tmp"
  echo "$RECIPE $RECIPE_VERSION" >"$tmp/.dotlab-complete"
  mv "$tmp" "$rootfs"
fi
dotlab_pack "dotlab.example/$RECIPE" --gzip --env LANG=C.UTF-8
