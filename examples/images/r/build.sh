#!/usr/bin/env bash
# Builds an R image: Debian bookworm minbase, then (apt-get in a chroot,
# --no-install-recommends, which resolves what debootstrap --include cannot,
# e.g. r-cran-hmisc) r-base-core with r-cran-* packages that replication
# packages commonly load: metafor, data.table, ggplot2, sandwich, lmtest,
# hmisc, dplyr, tidyr, readr, haven, readxl, car, lme4, aer (and the
# recommended packages they pull in: MASS, Matrix, survival, nlme, lattice…);
# packed with a deterministic gzip layer and imported into the local image
# store. The shared steps are in ../lib.sh.
#
#   examples/images/r/build.sh [--suite bullseye|bookworm|trixie] [DOTLAB_BIN] [VAR_DIR]
#
# The rootfs is cached in VAR_DIR/images/r-rootfs. Prints
# "DIGEST<TAB>dotlab.example/r@DIGEST" on the last line. The exact package
# versions are in /usr/share/dotlab/packages.txt and in the image label
# org.dotlab.packages (`dotlab image show REF`). Needs root and debootstrap.
set -euo pipefail
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"
dotlab_args "$@"

RECIPE=r
RECIPE_VERSION=2 # 2: fontconfig caches (they hold mtimes) trimmed
INCLUDE=
PACKAGES="r-base-core r-cran-metafor r-cran-data.table r-cran-ggplot2 r-cran-sandwich r-cran-lmtest
  r-cran-hmisc r-cran-dplyr r-cran-tidyr r-cran-readr r-cran-haven r-cran-readxl r-cran-car
  r-cran-lme4 r-cran-aer"
dotlab_rootfs
dotlab_pack dotlab.example/r --gzip --env LANG=C.UTF-8
