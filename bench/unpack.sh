#!/usr/bin/env bash
# First unpack of an image from a copy of an image store (bench/README.md
# "First unpack"): bench/unpack built from this tree and from commit REF,
# run alternately N times, each with a CPU profile (go tool pprof -top);
# the first round also times the inode-creation floor and `tar -xzf` of the
# same layers (the yardstick). The store is hard-linked, never written.
#
#   bench/unpack.sh [--before REF] [--store DIR] [--ref NAME] [N, default 2]
#
# e.g. bench/unpack.sh --before 58bf36f --store /work/imgvar/cache/images 2
set -euo pipefail
cd "$(dirname "$0")/.."
before= store=/work/imgvar/cache/images ref=dotlab.example/python-sci
while [ $# -gt 0 ]; do
  case $1 in
    --before) before=$2; shift 2 ;;
    --store) store=$2; shift 2 ;;
    --ref) ref=$2; shift 2 ;;
    *) break ;;
  esac
done
n=${1:-2}
bin=$(mktemp -d /tmp/dotlab-bench-unpack.XXXXXX)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/after" ./bench/unpack
if [ -n "$before" ]; then
  mkdir "$bin/src"
  git archive "$before" | tar -x -C "$bin/src"
  mkdir -p "$bin/src/bench/unpack" && cp bench/unpack/main.go "$bin/src/bench/unpack/"
  (cd "$bin/src" && go build -o "$bin/before" ./bench/unpack)
fi
rootfs=$(ls -d "$store"/rootfs/sha256/* 2>/dev/null | head -1 || true)
for i in $(seq "$n"); do
  echo "== round $i, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  extra=()
  [ "$i" = 1 ] && extra=(-tar) && [ -n "$rootfs" ] && extra+=(-floor "$rootfs")
  "$bin/after" -store "$store" -ref "$ref" -label after -profile "$bin/after-$i.pprof" "${extra[@]}"
  go tool pprof -top -nodecount=8 "$bin/after" "$bin/after-$i.pprof" 2>/dev/null | sed -n '4,14p'
  if [ -n "$before" ]; then
    "$bin/before" -store "$store" -ref "$ref" -label before -profile "$bin/before-$i.pprof"
    go tool pprof -top -nodecount=8 "$bin/before" "$bin/before-$i.pprof" 2>/dev/null | sed -n '4,14p'
  fi
done
