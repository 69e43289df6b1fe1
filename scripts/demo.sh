#!/usr/bin/env bash
# The main job on the bundled examples: installs what is missing, builds, starts viewlowerd on a
# temporary socket, then lowers, explains and verifies every example graph through it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)"

dir=$(mktemp -d)
sock="$dir/viewlower.sock"
build/daemon/viewlowerd --socket "$sock" --log-level warn &
daemon=$!
trap 'kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done

ctl=(build/client/viewlowerctl --socket "$sock")
"${ctl[@]}" ping
"${ctl[@]}" version
mkdir -p out/lowered
"${ctl[@]}" lower examples/graphs/*.json -o out/lowered
echo "lowered graphs written to out/lowered/"
for g in examples/graphs/*.json; do
  echo
  echo "== $g"
  "${ctl[@]}" explain "$g"
  status=0
  "${ctl[@]}" verify "$g" --seed 1 >"$dir/verify.json" || status=$?
  echo "verify (safe): $(cat "$dir/verify.json" | head -c 200) [exit $status]"
  status=0
  "${ctl[@]}" verify "$g" --seed 1 --policy legacy >"$dir/verify.json" || status=$?
  echo "verify (legacy): $(grep -o '"equal":[a-z]*' "$dir/verify.json") [exit $status]"
done
"${ctl[@]}" stats
