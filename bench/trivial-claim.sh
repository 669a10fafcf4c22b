#!/usr/bin/env bash
# The trivial claim of the rerun benchmarks (bench/run.sh, bench/rerunsteps):
# a busybox rootfs packed by `dotlab image build`, a one-line dataset, a git
# repository whose run.sh writes results.json, and the manifest m.json, all
# under WORK. Prints the image digest.
#
#   bench/trivial-claim.sh WORK DOTLAB_BIN BUSYBOX
set -euo pipefail
w=$1; dl=$2; bb=$3
mkdir -p "$w/rootfs/bin" "$w/rootfs/tmp" "$w/rootfs/etc" "$w/repo"
chmod 1777 "$w/rootfs/tmp"
cp "$bb" "$w/rootfs/bin/busybox"
for a in sh true echo cat; do ln -s busybox "$w/rootfs/bin/$a"; done
digest=$("$dl" image build "$w/rootfs" --ref localhost/bench/busybox --cache "$w/cache" | cut -f1)
printf 'x\n1\n' > "$w/data.csv"
sha=$(sha256sum "$w/data.csv" | cut -d' ' -f1)
git -C "$w/repo" init -q
echo 'echo "{\"v\": 1}" > "$DOTLAB_OUT_DIR/results.json"' > "$w/repo/run.sh"
git -C "$w/repo" add run.sh
git -C "$w/repo" -c user.email=b@example.org -c user.name=bench commit -qm bench
commit=$(git -C "$w/repo" rev-parse HEAD)
cat > "$w/m.json" <<JSON
{"spec_version":"0.1","title":"trivial","source":{"citation":"bench"},
 "datasets":[{"name":"d","url":"file://$w/data.csv","sha256":"$sha"}],
 "code":{"repository":"$w/repo","commit":"$commit"},
 "environment":{"image":"localhost/bench/busybox@$digest"},
 "entrypoint":["sh","run.sh"],
 "targets":[{"name":"v","value":1,"tolerance":{"type":"absolute","value":0}}]}
JSON
echo "$digest"
