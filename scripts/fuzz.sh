#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz (clang, -DVL_FUZZ=ON, in build-fuzz) and runs each
# for SECONDS (default 60) from its committed seed corpus, FUZZ_JOBS at a time. Prints, per
# harness, libFuzzer's final statistics (executions, exec/s, coverage edges and features,
# corpus size), then runs the differential test of the strict JSON readers (json_diff.py, at most
# 60 s), and ends with one JSON summary line. Exits 1 if any harness crashed, leaked,
# timed out or broke an oracle; the input that did it is kept in build-fuzz/fuzz-artifacts/.
#
#   scripts/fuzz.sh [SECONDS] [HARNESS...]      harnesses: graph tensor verify frame service
#   FUZZ_BUILD_DIR=build-fuzz  FUZZ_JOBS=$(nproc)  (environment, optional: build jobs and
#                                                harnesses run at once)
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
cmake --build "$build" -j "$jobs" --target "${harnesses[@]/#/fuzz_}" json_diff
diff_secs=$(( secs < 60 ? secs : 60 ))

# Each harness is one process (libFuzzer's default: one job), so they run FUZZ_JOBS at a time,
# each for SECONDS, and the differential test of the strict JSON readers beside them (the tree
# and streaming readers against Python's json held to RFC 8259, for at most 60 s: numbers,
# escapes, surrogates, nesting past the limit, mutated texts); the figures are printed in the
# order given, once all have ended.
run_one() { # run_one HARNESS: its campaign; the log in fuzz-logs, the exit status in .rc
  local h=$1 corpus="$build/fuzz-corpus/$1" artifacts="$build/fuzz-artifacts/$1"
  local log="$build/fuzz-logs/$1.log" rc=0
  rm -f "$log.rc"
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  cp -n tests/fuzz/corpus/"$h"/* "$corpus"/ 2>/dev/null || true
  local opts=(-max_total_time="$secs" -print_final_stats=1 -timeout=20 -rss_limit_mb=2048
              -max_len=16384 -artifact_prefix="$artifacts/")
  [ "$h" = frame ] || opts+=(-dict=tests/fuzz/json.dict)
  "$build/tests/fuzz/fuzz_$h" "${opts[@]}" "$corpus" >"$log" 2>&1 || rc=$?
  echo "$rc" >"$log.rc"
}
run_diff() { # the differential test; its summary line (or nothing) in json_diff.out, its status in .rc
  local out="$build/fuzz-logs/json_diff.out" rc=0
  rm -f "$out.rc"
  mkdir -p "$build/fuzz-artifacts/json_diff" "$build/fuzz-logs"
  python3 tests/fuzz/json_diff.py --driver "$build/tests/fuzz/json_diff" --seconds "$diff_secs" \
    --out "$build/fuzz-artifacts/json_diff/failure.bin" >"$out" || rc=$?
  echo "$rc" >"$out.rc"
}
echo "== fuzz ${harnesses[*]} for ${secs}s each and json_diff for ${diff_secs}s, $jobs at a time"
running=0
for h in "${harnesses[@]}" json_diff; do
  if ((running >= jobs)); then
    wait -n || true
    running=$((running - 1))
  fi
  if [ "$h" = json_diff ]; then run_diff & else run_one "$h" & fi
  running=$((running + 1))
done
wait

summary=()
failed=0
for h in "${harnesses[@]}"; do
  artifacts="$build/fuzz-artifacts/$h"
  log="$build/fuzz-logs/$h.log"
  rc=$(cat "$log.rc" 2>/dev/null || echo 1)
  echo "== fuzz $h for ${secs}s"
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
echo "== json_diff for ${diff_secs}s"
diff_line=$(cat "$build/fuzz-logs/json_diff.out" 2>/dev/null || true)
if [ "$(cat "$build/fuzz-logs/json_diff.out.rc" 2>/dev/null || echo 1)" -eq 0 ]; then
  echo "   $diff_line"
  summary+=("$(sed 's/^{"json_diff": //; s/}$//' <<<"$diff_line" | sed 's/^{/{"harness":"json_diff",/')")
else
  failed=1
  echo "   FAILED: the reproducer is $build/fuzz-artifacts/json_diff/failure.bin" >&2
  summary+=("{\"harness\":\"json_diff\",\"ok\":false}")
fi
(IFS=,; echo "{\"fuzz\":[${summary[*]}]}")
exit "$failed"
