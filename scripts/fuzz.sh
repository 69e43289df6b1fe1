#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz (clang, -DVL_FUZZ=ON, in build-fuzz) and runs each
# for SECONDS (default 60) from its committed seed corpus, one after the other. Prints, per
# harness, libFuzzer's final statistics (executions, exec/s, coverage edges and features,
# corpus size), then runs the differential test of the strict JSON readers (json_diff.py, at most
# 60 s), and ends with one JSON summary line. Exits 1 if any harness crashed, leaked,
# timed out or broke an oracle; the input that did it is kept in build-fuzz/fuzz-artifacts/.
#
#   scripts/fuzz.sh [SECONDS] [HARNESS...]      harnesses: graph tensor verify frame service
#   FUZZ_BUILD_DIR=build-fuzz  FUZZ_JOBS=2      (environment, optional)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(graph tensor verify frame service)
build=${FUZZ_BUILD_DIR:-build-fuzz}
jobs=${FUZZ_JOBS:-$(nproc)}

if ! command -v clang >/dev/null; then
  echo "fuzz.sh: clang is required (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
CC=clang cmake -S . -B "$build" -G Ninja -DVL_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$jobs" --target "${harnesses[@]/#/fuzz_}"

summary=()
failed=0
for h in "${harnesses[@]}"; do
  corpus="$build/fuzz-corpus/$h"
  artifacts="$build/fuzz-artifacts/$h"
  log="$build/fuzz-logs/$h.log"
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  cp -n tests/fuzz/corpus/"$h"/* "$corpus"/ 2>/dev/null || true
  opts=(-max_total_time="$secs" -print_final_stats=1 -timeout=20 -rss_limit_mb=2048
        -max_len=16384 -artifact_prefix="$artifacts/")
  [ "$h" = frame ] || opts+=(-dict=tests/fuzz/json.dict)
  echo "== fuzz $h for ${secs}s"
  rc=0
  "$build/tests/fuzz/fuzz_$h" "${opts[@]}" "$corpus" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  done_line=$(grep -E '^#[0-9]+.*(DONE|cov:)' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$done_line")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$done_line")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$done_line")
  echo "   execs=${execs:-?} exec/s=${speed:-?} cov=${cov:-?} ft=${ft:-?} corpus=${corp:-?} rc=$rc"
  if [ "$rc" -ne 0 ]; then
    failed=1
    echo "   FAILED: see $log; reproducer(s):" >&2
    ls "$artifacts" >&2 || true
    grep -E 'ERROR|oracle failed|SUMMARY|Test unit written' "$log" | head -20 >&2 || true
  fi
  summary+=("{\"harness\":\"$h\",\"seconds\":$secs,\"execs\":${execs:-0},\"exec_per_sec\":${speed:-0},\"cov\":${cov:-0},\"ft\":${ft:-0},\"corpus\":${corp:-0},\"ok\":$([ "$rc" -eq 0 ] && echo true || echo false)}")
done
# The strict JSON readers (tree and streaming) against Python's json held to RFC 8259, for at
# most 60 s: numbers, escapes, surrogates, nesting past the limit, mutated texts.
diff_secs=$(( secs < 60 ? secs : 60 ))
cmake --build "$build" -j "$jobs" --target json_diff >/dev/null
echo "== json_diff for ${diff_secs}s"
mkdir -p "$build/fuzz-artifacts/json_diff"
if diff_line=$(python3 tests/fuzz/json_diff.py --driver "$build/tests/fuzz/json_diff" \
                 --seconds "$diff_secs" --out "$build/fuzz-artifacts/json_diff/failure.bin"); then
  echo "   $diff_line"
  summary+=("$(sed 's/^{"json_diff": //; s/}$//' <<<"$diff_line" | sed 's/^{/{"harness":"json_diff",/')")
else
  failed=1
  echo "   FAILED: the reproducer is $build/fuzz-artifacts/json_diff/failure.bin" >&2
  summary+=("{\"harness\":\"json_diff\",\"ok\":false}")
fi
(IFS=,; echo "{\"fuzz\":[${summary[*]}]}")
exit "$failed"
