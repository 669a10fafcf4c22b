#!/usr/bin/env bash
# Benchmarks of issue 12 ("Real replication packages"), side by side in one
# run (bench/README.md, "Replication packages"):
#   (a) `dotlab rerun` of examples/claims/longley-1967 on the python-sci image
#       (unpacked and cached) vs the same command by bare `runc run`;
#   (b) the first-run unpack of the python-sci image vs a cached rerun;
#   (c) a rerun with a 1 GiB dataset on loopback, over the same rerun with a
#       4-byte one, vs `curl -o` and `curl -o && sha256sum` of the same URL.
# Root, with runc, curl, debootstrap, git and go. Builds dotlab from this
# tree, and with --before REF also from the commit REF (its data rows are
# measured alongside), then the two image recipes into VAR (cached after the
# first time), then runs `go run ./bench/packages`.
#
#   bench/packages.sh [--before REF] [--var DIR] [-- FLAGS for bench/packages]
#
# e.g. bench/packages.sh --before ff16671 -- -n 7
set -euo pipefail
cd "$(dirname "$0")/.."
before= var=var
while [ $# -gt 0 ]; do
  case $1 in
    --before) before=$2; shift 2 ;;
    --var) var=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: bench/packages.sh [--before REF] [--var DIR] [-- FLAGS]" >&2; exit 2 ;;
  esac
done
for tool in runc curl debootstrap git go sha256sum; do
  command -v "$tool" >/dev/null || { echo "bench/packages.sh: $tool not found (apt-get install -y runc curl debootstrap)" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "bench/packages.sh: needs root (runc, debootstrap)" >&2; exit 2; }

bin=$(mktemp -d /tmp/dotlab-bench-packages.XXXXXX)
trap 'rm -rf "$bin"; rmdir /sys/fs/cgroup/*/dotlab-bench 2>/dev/null || true' EXIT
go build -o "$bin/dotlab" ./cmd/dotlab
flags=()
if [ -n "$before" ]; then
  mkdir "$bin/before-src"
  git archive "$before" | tar -x -C "$bin/before-src"
  (cd "$bin/before-src" && go build -o "$bin/dotlab-before" ./cmd/dotlab)
  flags+=(-before "$bin/dotlab-before")
  echo "before: $(git rev-parse --short "$before") ($(git log -1 --format=%s "$before" | cut -c1-60))"
fi
mkdir -p "$var"
echo "building the images (cached in $var/images after the first time)…" >&2
sci=$(bash examples/images/python-sci/build.sh "$bin/dotlab" "$var" | awk 'END{print $NF}')
py=$(bash examples/images/python/build.sh "$bin/dotlab" "$var" | awk 'END{print $NF}')
echo "dotlab: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!bench' || echo ' + uncommitted changes')"
go run ./bench/packages -dotlab "$bin/dotlab" -sci "$sci" -py "$py" -var "$var" "${flags[@]}" "$@"
