# Shared steps of the image recipes under examples/images (sourced, not run).
#
# A recipe sets a few variables and calls two functions:
#
#   RECIPE=name           rootfs cached in $var/images/$RECIPE-rootfs
#   RECIPE_VERSION=N      bump when the recipe changes: a cached rootfs built by
#                         another version is rebuilt
#   INCLUDE=a,b           packages for debootstrap --include (optional)
#   PACKAGES="a b c"      packages for apt-get install --no-install-recommends
#                         in a chroot after debootstrap (optional; resolves
#                         dependencies that --include cannot, e.g. r-cran-hmisc)
#   recipe_customize()    optional function run on the tree ($1) after
#                         installation (in the chroot session) and before trimming
#   recipe_finish()       optional function run on the tree ($1) after trimming
#                         (e.g. compiling byte code that the trim removed)
#   dotlab_rootfs         builds (or reuses) the rootfs; sets $rootfs
#   dotlab_pack REF ARGS  packs it with `dotlab image build` (ARGS are extra
#                         flags such as --gzip or --env) and prints the last
#                         line: DIGEST<TAB>REF@DIGEST
#
# and reads $dotlab (the dotlab binary) and $var (the var directory), which
# dotlab_args sets from the recipe's command line:
#
#   RECIPE/build.sh [--suite bullseye|bookworm|trixie] [DOTLAB_BIN] [VAR_DIR]
#
# The suite (default bookworm; $SUITE in the recipe) is the Debian release
# debootstrap installs: bullseye (Python 3.9, R 4.0), bookworm (Python 3.11,
# R 4.2) or trixie (Python 3.13, R 4.5); $PYVER is its Python version. A
# suite other than bookworm is cached as $var/images/$RECIPE-$SUITE-rootfs
# and packed as REF-$SUITE (dotlab.example/python-trixie), so the bookworm
# images and their caches keep their names.
#
# What every recipe gets: Debian (bookworm unless --suite), debootstrap --variant=minbase; apt in
# a chroot with /proc mounted only for the installation (unmounted by a trap,
# also on error or interruption) and a policy-rc.d that keeps services from
# starting; zoneinfo (/usr/share/zoneinfo, tzdata) and the C.UTF-8 locale
# (/usr/lib/locale/C.utf8) kept; the installed package list written to
# /usr/share/dotlab/packages.txt (one "package=version" a line, sorted), which
# dotlab_pack also records as the image label org.dotlab.packages; a
# deterministic trim (apt lists and caches, logs, machine-id, hostname,
# resolv.conf, *-old and *- backups, documentation, man pages, message
# translations, dpkg md5sums, fontconfig caches, __pycache__); /tmp 1777; /work/{code,data,out};
# no device nodes. Needs root and debootstrap.

# dotlab_args [--suite S] [DOTLAB_BIN] [VAR_DIR] sets SUITE, PYVER, dotlab and var.
dotlab_args() {
  SUITE=bookworm
  if [ "${1:-}" = --suite ]; then
    SUITE=${2:-}
    shift 2 || true
  fi
  case "$SUITE" in
    bullseye) PYVER=3.9 ;;
    bookworm) PYVER=3.11 ;;
    trixie) PYVER=3.13 ;;
    *) echo "--suite $SUITE: give bullseye, bookworm or trixie" >&2; exit 2 ;;
  esac
  dotlab=${1:-dotlab}
  var=${2:-var}
}

# dotlab_name prints NAME, or NAME-$SUITE for a suite other than bookworm.
dotlab_name() {
  if [ "${SUITE:-bookworm}" = bookworm ]; then echo "$1"; else echo "$1-$SUITE"; fi
}

dotlab_mirror() {
  local m
  m=$(grep -hoE '^(deb|URIs:)\s+https?://[^ ]+' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
    | awk '{print $2}' | grep -v -- '-security' | head -1 || true)
  echo "${m:-http://deb.debian.org/debian}"
}

# dotlab_chroot_apt ROOT PACKAGE... installs packages inside ROOT with apt-get.
dotlab_chroot_apt() {
  local root=$1
  shift
  (
    cleanup() {
      if mountpoint -q "$root/proc"; then umount "$root/proc" || umount -l "$root/proc"; fi
      rm -f "$root/usr/sbin/policy-rc.d" "$root/etc/resolv.conf"
    }
    trap cleanup EXIT
    trap 'exit 130' INT TERM HUP
    printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
    chmod 755 "$root/usr/sbin/policy-rc.d"
    cp -L /etc/resolv.conf "$root/etc/resolv.conf"
    mount -t proc proc "$root/proc"
    local env=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 HOME=/root)
    chroot "$root" "${env[@]}" apt-get update -qq
    chroot "$root" "${env[@]}" apt-get install -y -qq --no-install-recommends \
      -o Dpkg::Use-Pty=0 -o APT::Install-Suggests=false "$@"
    chroot "$root" "${env[@]}" apt-get clean
    if declare -F recipe_customize >/dev/null; then recipe_customize "$root"; fi
  )
}

# dotlab_trim ROOT removes what an analysis never needs and what varies between builds.
dotlab_trim() {
  local r=$1
  mkdir -p "$r/usr/share/dotlab"
  chroot "$r" dpkg-query -W -f='${Package}=${Version}\n' | LC_ALL=C sort >"$r/usr/share/dotlab/packages.txt"
  rm -rf "$r"/var/lib/apt/lists/* "$r"/var/cache/apt/* \
         "$r"/var/cache/debconf/*-old "$r"/var/cache/ldconfig/* \
         "$r"/usr/share/doc/* "$r"/usr/share/man/* "$r"/usr/share/info/* \
         "$r"/usr/share/locale/* \
         "$r"/var/log/* "$r"/var/lib/dpkg/*-old "$r"/var/lib/dpkg/info/*.md5sums \
         "$r"/etc/machine-id "$r"/etc/hostname "$r"/etc/resolv.conf \
         "$r"/etc/*- "$r"/var/lib/systemd/* "$r"/debootstrap \
         "$r"/root/.cache "$r"/root/.bash_history "$r"/var/cache/fontconfig/*
  find "$r" -xdev -name '__pycache__' -type d -prune -exec rm -rf {} +
  # Device nodes cannot go into an image; the runtime provides /dev.
  find "$r/dev" -mindepth 1 -delete
  chmod 1777 "$r/tmp"
  find "$r/tmp" "$r/var/tmp" -mindepth 1 -delete
  mkdir -p "$r/work/code" "$r/work/data" "$r/work/out"
}

# dotlab_rootfs builds $var/images/$RECIPE-rootfs unless a complete one of
# this RECIPE_VERSION is cached, and sets rootfs to it.
dotlab_rootfs() {
  local name
  name=$(dotlab_name "$RECIPE")
  rootfs="$var/images/$name-rootfs"
  local stamp="$RECIPE $RECIPE_VERSION"
  if [ "${SUITE:-bookworm}" != bookworm ]; then stamp="$stamp $SUITE"; fi
  mkdir -p "$var/images"
  # One build of a recipe at a time per var dir (the demo and the image tests
  # may start the same recipe at once): the lock is held on fd 9 until the
  # script exits, through the packing, and the second caller then finds the
  # finished rootfs.
  exec 9>"$var/images/.$name.lock"
  flock 9
  if [ -f "$rootfs/.dotlab-complete" ] && [ "$(cat "$rootfs/.dotlab-complete")" = "$stamp" ]; then
    return 0
  fi
  local mirror tmp="$rootfs.tmp"
  mirror=$(dotlab_mirror)
  echo "building the $name rootfs (Debian ${SUITE:-bookworm}) with debootstrap from $mirror…" >&2
  for d in "$rootfs" "$tmp"; do
    if mountpoint -q "$d/proc" 2>/dev/null; then umount "$d/proc" || umount -l "$d/proc"; fi
    rm -rf --one-file-system "$d"
  done
  debootstrap --variant=minbase ${INCLUDE:+--include="$INCLUDE"} "${SUITE:-bookworm}" "$tmp" "$mirror" >&2
  if [ -n "${PACKAGES:-}" ]; then
    # shellcheck disable=SC2086 # PACKAGES is a word list
    dotlab_chroot_apt "$tmp" $PACKAGES >&2
  fi
  dotlab_trim "$tmp"
  if declare -F recipe_finish >/dev/null; then recipe_finish "$tmp" >&2; fi
  echo "$stamp" >"$tmp/.dotlab-complete"
  mv "$tmp" "$rootfs"
}

# dotlab_pack REF [FLAG...] packs $rootfs into the store under $var/cache
# (as REF-$SUITE for a suite other than bookworm).
# A pack of this rootfs with the same flags whose image is still in the
# store is reused (recorded in $var/images/$RECIPE.packed): packing is
# deterministic, so repacking would only give the same digest again.
dotlab_pack() {
  local ref
  ref=$(dotlab_name "$1")
  shift
  local packed="$var/images/$(dotlab_name "$RECIPE").packed" key line
  key="$(cat "$rootfs/.dotlab-complete") $ref $*"
  if [ -f "$packed" ] && [ "$(head -1 "$packed")" = "$key" ]; then
    line=$(sed -n 2p "$packed")
    if "$dotlab" image show "${line%%$'\t'*}" --cache "$var/cache" >/dev/null 2>&1; then
      echo "$line"
      return 0
    fi
  fi
  find "$rootfs/dev" -mindepth 1 -delete 2>/dev/null || true
  line=$("$dotlab" image build "$rootfs" --ref "$ref" --cache "$var/cache" \
    --label "org.dotlab.packages=$(cat "$rootfs/usr/share/dotlab/packages.txt")" "$@" | tail -1)
  printf '%s\n%s\n' "$key" "$line" >"$packed"
  echo "$line"
}
