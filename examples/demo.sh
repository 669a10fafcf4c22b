#!/usr/bin/env bash
# The README's main job: installs what the demo needs (runc, git, debootstrap)
# when missing, builds dotlab, and runs `dotlab demo` on the real example
# claims. Run from the repository root, as root. Extra arguments go to
# `dotlab demo` (e.g. --exit).
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
for tool in runc git debootstrap; do
  command -v "$tool" >/dev/null 2>&1 || need+=("$tool")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]} (apt)…" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
go build -o dotlab ./cmd/dotlab
exec ./dotlab demo "$@"
