#!/usr/bin/env bash
# gen-ninja.sh GRAPHS OUT CTL [SOCKET] > build.ninja - the ninja twin of the Makefile: one
# build edge per graph of GRAPHS, lowered through viewlowerd into OUT/NAME.json. ninja runs
# as many at once as -j says (default: the cores + 2).
set -euo pipefail
graphs=$1 out=$2 ctl=$3 socket=${4:-}
esc() { printf '%s' "$1" | sed 's/[$ :]/$&/g'; }
echo "ctl = $(esc "$ctl")${socket:+ --socket $(esc "$socket")}"
echo "rule lower"
echo '  command = $ctl lower $in -o $out.tmp && mv $out.tmp $out'
echo '  description = lower $in'
for g in "$graphs"/*.json; do
  echo "build $(esc "$out/$(basename "$g")"): lower $(esc "$g")"
done
