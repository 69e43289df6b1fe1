#!/usr/bin/env bash
# Builds viewlower in Release (build-release/) and runs viewlower-bench, which prints one JSON
# object: copy-kernel throughput next to memcpy and a naive loop, and lowering times.
#   scripts/bench.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DVL_BUILD_TESTS=OFF >/dev/null
cmake --build build-release --target viewlower-bench >/dev/null
exec build-release/bench/viewlower-bench "$@"
