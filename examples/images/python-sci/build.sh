#!/usr/bin/env bash
# Builds a scientific Python image: Debian bookworm minbase, then (apt-get in
# a chroot, --no-install-recommends) python3 with numpy, scipy, pandas,
# statsmodels, matplotlib (non-interactive backend: MPLBACKEND=Agg in the
# image config and "backend: Agg" in /etc/matplotlibrc) and openpyxl; byte
# code compiled once with unchecked-hash pycs (no mtimes inside, so valid
# after the epoch-mtime packing); packed with a deterministic gzip layer and
# imported into the local image store. The shared steps are in ../lib.sh.
#
#   examples/images/python-sci/build.sh [--suite bullseye|bookworm|trixie] [DOTLAB_BIN] [VAR_DIR]
#
# The rootfs is cached in VAR_DIR/images/python-sci-rootfs. Prints
# "DIGEST<TAB>dotlab.example/python-sci@DIGEST" on the last line. The exact
# package versions are in /usr/share/dotlab/packages.txt and in the image
# label org.dotlab.packages (`dotlab image show REF`). Needs root and
# debootstrap.
set -euo pipefail
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"
dotlab_args "$@"

RECIPE=python-sci
RECIPE_VERSION=2 # 2: pycs compiled after the trim
INCLUDE=
PACKAGES="python3 python3-numpy python3-scipy python3-pandas python3-statsmodels python3-matplotlib python3-openpyxl"
recipe_customize() {
  printf 'backend: Agg\n' >"$1/etc/matplotlibrc"
}
recipe_finish() {
  local r=$1
  # After the trim (which removes Debian's mtime-stamped pycs, invalid once
  # packed with epoch mtimes). One process, a fixed order: the same sources give the same pycs.
  chroot "$r" env -i PATH=/usr/bin:/bin LANG=C.UTF-8 PYTHONHASHSEED=0 \
    python3 -m compileall -q -j 1 --invalidation-mode unchecked-hash \
    "/usr/lib/python$PYVER" /usr/lib/python3/dist-packages >/dev/null \
    || echo "compileall: some files did not compile (they stay source only)" >&2
}
dotlab_rootfs
dotlab_pack dotlab.example/python-sci --gzip --env MPLBACKEND=Agg --env LANG=C.UTF-8
