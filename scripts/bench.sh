#!/usr/bin/env bash
# Builds viewlower in Release (build-release/) and prints one JSON object measured in one run:
# the copy cases (ours, memcpy, the naive loop; PyTorch copy_ on 1 and all threads and NumPy
# copyto on the same cases, side by side), the 64 MiB one-/two-thread copy, the lowering
# figures, and the daemon against in-process and plain-socket baselines (bench/compare.py,
# run with /usr/bin/python3; without it, viewlower-bench's own figures alone).
#   scripts/bench.sh [--quick] [--level portable|sse2|ssse3|avx2|avx512]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DVL_BUILD_TESTS=OFF >/dev/null
cmake --build build-release --target viewlower-bench viewlowerd viewlower-load >/dev/null
if [[ -x /usr/bin/python3 ]]; then
  exec /usr/bin/python3 bench/compare.py build-release "$@"
fi
exec build-release/bench/viewlower-bench "$@"
