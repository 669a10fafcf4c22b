#!/usr/bin/env bash
# Runner-side benchmarks (docs/sandbox.md "Benchmarks"). Root, with runc,
# podman and busybox-static installed. Prints the Go benchmark lines, then a
# whole `dotlab rerun` CLI run of a trivial claim against bare runc.
# Usage: bench/run.sh [iterations, default 30]
#
# bench/run.sh downloads [iterations, default 10]: instead, the pinned
# downloads' benchmarks (bench/README.md "Pinned downloads").
#
# bench/run.sh api [seconds a row, default 10]: instead, the API write
# benchmarks of issue 15 on PostgreSQL (127.0.0.1:5432, database test; and
# Debian's haproxy), side by side in one run: the bare insert loop, the bare
# loop with the transparency log's rows, the API in process, then `dotlab
# serve` processes — one direct, one through HAProxy, two through HAProxy —
# each with a sample of where PostgreSQL's backends spend the time
# (bench/README.md "Scale-out").
#
# bench/run.sh env: instead, BenchmarkAptLayer (bench/README.md
# "Environments"): apt.txt python3-sklearn layered onto the scientific Python
# image (cold and warm buildah storage) beside a full recipe build with that
# package, one run each (root, buildah, runc, debootstrap, the Debian mirror;
# about 7 minutes of both cores; the images var as $DOTLAB_IMAGES_VAR).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = downloads ]; then
  # Pinned downloads (bench/README.md "Pinned downloads"): a download-free
  # run, a 100 MB download in the sandbox (busybox; python-net too when
  # DOTLAB_IMAGES_VAR holds it), and the responder alone.
  go test -run '^$' -bench 'DownloadFreeRun|Download100MB' -benchtime "${2:-10}x" -count 1 ./bench/
  exec go test -run '^$' -bench 'Responder100MB' -benchtime "${2:-10}x" -count 1 ./sandbox/
fi
if [ "${1:-}" = env ]; then
  DOTLAB_BENCH_ENV=1 exec go test -run '^$' -bench AptLayer -benchtime 1x -count 1 -timeout 40m -v ./bench/
fi
if [ "${1:-}" = api ]; then
  exec go run ./bench/api -db postgres -writes-only -balancer -pg-waits -duration "${2:-10}s"
fi
n="${1:-30}"
echo "== sandbox: dotlab vs runc (same config, minimal) vs podman; rerun (in process) vs runc"
go test -run '^$' -bench 'True|RerunTrivial' -benchtime "${n}x" -count 1 ./bench/
echo "== 1 GiB download + verify on loopback vs crypto/sha256"
go test -run '^$' -bench 'Download1GiB' -benchtime 3x -count 1 ./runner/

echo "== whole CLI: dotlab rerun of a trivial claim vs bare runc run (means of $n)"
work=$(mktemp -d /tmp/dotlabbench.XXXXXX)
trap 'rm -rf "$work"; rmdir /sys/fs/cgroup/*/dotlab-bench 2>/dev/null || true' EXIT
go build -o "$work/dotlab" ./cmd/dotlab
bb=$(command -v busybox)
digest=$(bash bench/trivial-claim.sh "$work" "$work/dotlab" "$bb")
"$work/dotlab" rerun "$work/m.json" --allow-local "$work" --cache "$work/cache" --out "$work/warm" >/dev/null
mkdir -p "$work/bundle"
rootfs="$work/cache/images/rootfs/sha256/${digest#sha256:}"
cat > "$work/bundle/config.json" <<JSON
{"ociVersion":"1.0.2","process":{"user":{"uid":1000,"gid":1000},"args":["/bin/true"],"env":["PATH=/bin"],"cwd":"/",
 "rlimits":[{"type":"RLIMIT_NOFILE","hard":1024,"soft":1024}],"noNewPrivileges":true},
 "root":{"path":"$rootfs","readonly":true},"hostname":"bare",
 "mounts":[{"destination":"/proc","type":"proc","source":"proc"},{"destination":"/dev","type":"tmpfs","source":"tmpfs","options":["nosuid","mode=755"]}],
 "linux":{"cgroupsPath":"/dotlab-bench/cli","namespaces":[{"type":"pid"},{"type":"network"},{"type":"ipc"},{"type":"uts"},{"type":"mount"}]}}
JSON
t_rerun=0; t_runc=0
for i in $(seq "$n"); do
  s=$(date +%s%N); "$work/dotlab" rerun "$work/m.json" --allow-local "$work" --cache "$work/cache" --out "$work/o$i" >/dev/null; e=$(date +%s%N)
  t_rerun=$((t_rerun + e - s))
  s=$(date +%s%N); runc --root "$work/state" run --bundle "$work/bundle" "cli-$i"; e=$(date +%s%N)
  t_runc=$((t_runc + e - s))
done
awk -v a="$t_rerun" -v b="$t_runc" -v n="$n" 'BEGIN{printf "dotlab rerun (CLI) %.1f ms, bare runc run %.1f ms, ratio %.2f (goal <= 2)\n", a/n/1e6, b/n/1e6, a/b}'
echo "== the same rerun split into its steps (bench/rerunsteps)"
go run ./bench/rerunsteps -dotlab "$work/dotlab" -n "$n"
