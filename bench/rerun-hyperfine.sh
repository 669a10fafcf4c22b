#!/usr/bin/env bash
# A trivial `dotlab rerun` (the whole command as a process; busybox image
# cached, one 4-byte file:// dataset, a local git repository) against bare
# `runc run` of /bin/true on the same rootfs, side by side in one hyperfine
# run (its commands interleave only per benchmark, so the script repeats the
# pair ROUNDS times and prints each round's ratio of medians, with uptime).
#
#   bench/rerun-hyperfine.sh DOTLAB_BIN [BEFORE_BIN] [ROUNDS] [RUNS]   (root; runc, busybox, hyperfine)
set -euo pipefail
dl=$(realpath "$1"); before=${2:-}; rounds=${3:-3}; runs=${4:-30}
[ -n "$before" ] && before=$(realpath "$before")
w=$(mktemp -d /tmp/rerun-hf-XXXXXX); trap 'rm -rf "$w"; rmdir /sys/fs/cgroup/*/dotlab-bench/hf /sys/fs/cgroup/*/dotlab-bench 2>/dev/null || true' EXIT
here=$(dirname "$0")
"$here/trivial-claim.sh" "$w" "$dl" "$(command -v busybox)" >/dev/null
"$dl" rerun "$w/m.json" --allow-local "$w" --cache "$w/cache" --out "$w/warm" >/dev/null
rootfs=$(grep -o '"rootfs":"[^"]*"' "$w/warm/logs.jsonl" | head -1 | cut -d'"' -f4)
mkdir -p "$w/bundle"
cat > "$w/bundle/config.json" <<JSON
{"ociVersion":"1.0.2","process":{"user":{"uid":1000,"gid":1000},"args":["/bin/true"],"env":["PATH=/bin"],"cwd":"/",
 "rlimits":[{"type":"RLIMIT_NOFILE","hard":1024,"soft":1024}],"noNewPrivileges":true},
 "root":{"path":"$rootfs","readonly":true},"hostname":"bare",
 "mounts":[{"destination":"/proc","type":"proc","source":"proc"},{"destination":"/dev","type":"tmpfs","source":"tmpfs","options":["nosuid","mode=755"]}],
 "linux":{"cgroupsPath":"/dotlab-bench/hf","namespaces":[{"type":"pid"},{"type":"network"},{"type":"ipc"},{"type":"uts"},{"type":"mount"}]}}
JSON
cmds=(-n bare "runc --root $w/state run --bundle $w/bundle bare"
      -n dotlab "$dl rerun $w/m.json --allow-local $w --cache $w/cache --out $w/out")
[ -n "$before" ] && cmds+=(-n before "$before rerun $w/m.json --allow-local $w --cache $w/cache --out $w/out")
for r in $(seq 1 "$rounds"); do
  echo "round $r: $(uptime)"
  hyperfine -N -w 3 -r "$runs" --prepare "rm -rf $w/out" --export-json "$w/r$r.json" "${cmds[@]}" >/dev/null 2>&1
  python3 - "$w/r$r.json" <<'PY'
import json, sys
res = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
bare = res["bare"]["median"]
for name, r in res.items():
    cpu = r["user"] + r["system"]
    print(f"  {name:7s} median {r['median']*1e3:7.1f} ms  min {r['min']*1e3:7.1f} ms  user+sys {cpu*1e3:6.1f} ms  x bare {r['median']/bare:5.2f}  (min/min {r['min']/res['bare']['min']:5.2f})")
PY
  echo "  after: $(uptime)"
done
