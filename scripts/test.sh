#!/usr/bin/env bash
# Installs dependencies, builds with warnings as errors, and runs the whole suite twice:
# a normal build, then AddressSanitizer + UndefinedBehaviorSanitizer. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)

echo "== build (warnings are errors)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVL_WERROR=ON >/dev/null
cmake --build build -j "$jobs"
echo "== tests"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
ctest --test-dir build --output-on-failure -j "$jobs" -LE systemd | tee -a "$log"

# Its own stage: the first run debootstraps the cached test root (about 3 min), later ones take
# about a minute (docs/deployment.md); skipped with one line where systemd-nspawn cannot run.
echo "== systemd (the .debs installed and booted under a real systemd with systemd-nspawn)"
ctest --test-dir build --output-on-failure -V -L systemd | tee -a "$log"  # -V: its figures, or why it skipped

echo "== python front end (pytest: client, exporter, the model zoo through a real viewlowerd)"
VIEWLOWERD=build/daemon/viewlowerd VIEWLOWERCTL=build/client/viewlowerctl PYTHONDONTWRITEBYTECODE=1 \
  /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/python | tee -a "$log"

echo "== build (ASan + UBSan)"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DVL_WERROR=ON -DVL_SANITIZE=ON >/dev/null
cmake --build build-asan -j "$jobs"
echo "== tests under ASan + UBSan"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs" | tee -a "$log"

echo "== fuzz (libFuzzer + ASan + UBSan, ${VL_FUZZ_SECONDS:-60} s per harness; a crash fails the run)"
scripts/fuzz.sh "${VL_FUZZ_SECONDS:-60}" | tee -a "$log"
scripts/bazel-test.sh | tee -a "$log"  # Bazel rules + worker, examples/bazel offline

# One closing line over all three stages: ctest runs (normal, sanitizers) and fuzz harnesses.
passed=0
failed=0
while read -r nfail total; do
  passed=$((passed + total - nfail))
  failed=$((failed + nfail))
done < <(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\1 \2/p' "$log")
passed=$((passed + $(grep -o '"ok":true' "$log" | wc -l || true)))
# pytest's closing line: "N passed, M failed, K xfailed in T s" (any of them may be absent).
pyline=$(grep -E '^[0-9]+ [a-z]+.* in [0-9.]+s' "$log" | tail -1 || true)
pycount() { grep -oE "[0-9]+ $1" <<<"$pyline" | grep -oE '^[0-9]+' || echo 0; }
passed=$((passed + $(pycount passed)))
failed=$((failed + $(pycount failed) + $(pycount "errors?")))
failed=$((failed + $(grep -o '"ok":false' "$log" | wc -l || true)))
echo "summary: $passed passed, $failed failed"
