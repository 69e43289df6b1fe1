#!/usr/bin/env bash
# The whole suite, as CI runs it (.ci/run): installs what is missing, builds with warnings as
# errors and runs every ctest (the model zoo and the oracles included; the systemd test is a
# stage of its own), builds again with AddressSanitizer + UndefinedBehaviorSanitizer and runs
# every ctest there, runs each libFuzzer harness for a short campaign, and the Bazel stage.
# Stops at the first stage that fails and exits non-zero.
#
#   scripts/test.sh               every stage (what .ci/run runs)
#   scripts/test.sh --fast        the fast lane: build, then the unit tests and the fuzz replays
#   scripts/test.sh STAGE...      those stages only, in the order given: deps build tests
#                                 systemd asan-build asan-tests fuzz bazel, or fast (the fast
#                                 lane's tests, on an existing build)
#   VL_FUZZ_SECONDS=20            seconds per fuzz harness (CONTRIBUTING.md, "Test lanes")
#
# After each stage one line: "stage NAME: ok|FAILED WALL s (cpu CPU s)", CPU being the user +
# system time of the stage's processes (the Bazel server's own is not counted); at the end all
# of them again, the total, and one line over every check: "summary: N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
all=(deps build tests systemd asan-build asan-tests fuzz bazel)
stages=("$@")
if [[ ${1:-} == --fast ]]; then
  stages=(build fast)
elif ((${#stages[@]} == 0)); then
  stages=("${all[@]}")
fi

for s in "${stages[@]}"; do
  if [[ " ${all[*]} fast " != *" $s "* ]]; then
    echo "test.sh: unknown stage $s (--fast, fast or: ${all[*]})" >&2
    exit 64
  fi
done
log=$(mktemp)
times_file=$(mktemp)
root_log=$(mktemp)
root_pid= root_started=
stop_test_root() { # an unfinished background build of the test root is stopped (and cleans up)
  if [[ -n $root_pid ]] && kill -0 "$root_pid" 2>/dev/null; then
    kill -TERM -- "-$root_pid" 2>/dev/null || true
    wait "$root_pid" 2>/dev/null || true
  fi
}
trap 'stop_test_root; rm -f "$log" "$times_file" "$root_log"' EXIT
sanitizer_env=(ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
               UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1)

# The systemd stage's cached Debian root (scripts/test-root.sh) is built in the background from
# the first stage after deps on, when it is missing: that build mostly waits on the mirror (2 to
# 5 minutes on a fresh machine), so it overlaps the build and the tests instead of adding to
# the run. Its own process group, so that stop_test_root can stop all of it.
start_test_root() {
  root_started=1
  [[ " ${stages[*]} " == *" systemd "* && $(id -u) == 0 ]] || return 0
  command -v debootstrap >/dev/null && command -v setsid >/dev/null || return 0
  setsid scripts/test-root.sh >/dev/null 2>"$root_log" &
  root_pid=$! root_started=1
}
wait_test_root() { # in the systemd stage: the background build's end and what it said
  [[ -n $root_pid ]] || return 0
  local rc=0
  wait "$root_pid" || rc=$?
  root_pid=
  sed 's/^/test root: /' "$root_log"
  ((rc == 0)) || echo "test root: the background build failed ($rc); the test tries again"
}

run_stage() { # the commands of one stage; their output goes to the terminal and the log
  case $1 in
    deps) scripts/install-deps.sh ;;
    build)
      cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVL_WERROR=ON >/dev/null &&
        cmake --build build -j "$jobs" ;;
    fast) ctest --test-dir build --output-on-failure -j "$jobs" -L 'unit|fuzz' ;;
    tests) ctest --test-dir build --output-on-failure -j "$jobs" -LE systemd ;;
    # The .debs booted under a real systemd (systemd-nspawn), in the cached test root (built in
    # the background meanwhile when missing, see start_test_root): about a minute
    # (docs/deployment.md); skipped with one line where nspawn cannot run. -V: its figures, or
    # why it skipped.
    systemd) wait_test_root && ctest --test-dir build --output-on-failure -V -L systemd ;;
    asan-build)
      cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DVL_WERROR=ON -DVL_SANITIZE=ON \
        >/dev/null && cmake --build build-asan -j "$jobs" ;;
    asan-tests) env "${sanitizer_env[@]}" ctest --test-dir build-asan --output-on-failure -j "$jobs" ;;
    fuzz) scripts/fuzz.sh "${VL_FUZZ_SECONDS:-20}" ;; # libFuzzer + ASan + UBSan; a crash fails
    bazel) scripts/bazel-test.sh ;; # Bazel rules + worker, examples/bazel offline
  esac
}

cpu_ms() { # sets cpu_ms_now: user + system time of this shell's waited-for children, in ms
  times >"$times_file" # here, not in a $(...) subshell: line 2 is "0m1.250s 0m0.310s" (children)
  cpu_ms_now=$(awk 'NR == 2 {t = 0; for (i = 1; i <= 2; i++) {split($i, p, /[ms]/)
                                                             t += p[1] * 60 + p[2]}
                            printf "%d", t * 1000}' "$times_file")
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }

lines=()
t_start=$(now_ms)
failed_stage=
for s in "${stages[@]}"; do
  [[ $s == deps || -n $root_started ]] || start_test_root
  echo "== $s"
  cpu_ms
  t0=$(now_ms) c0=$cpu_ms_now rc=0
  run_stage "$s" > >(tee -a "$log") 2>&1 || rc=$?
  # the tee of this stage ($! is the process substitution's), not the test root's background
  # build: a bare wait reaped that too, so the systemd stage's wait for it failed (127, "not a
  # child of this shell") and the build no longer overlapped the stages after the first
  wait "$!"
  cpu_ms
  wall=$((($(now_ms) - t0 + 500) / 1000)) cpu=$(((cpu_ms_now - c0 + 500) / 1000))
  lines+=("stage $s: $( ((rc == 0)) && echo ok || echo FAILED) $wall s (cpu $cpu s)")
  echo "${lines[-1]}"
  if ((rc != 0)); then
    failed_stage=$s
    break
  fi
done

echo "== stages"
printf '%s\n' "${lines[@]}"
echo "total: $((($(now_ms) - t_start + 500) / 1000)) s"
# One closing line over the stages' checks: ctest runs, fuzz harnesses and Bazel checks.
passed=0
failed=0
while read -r nfail total; do
  passed=$((passed + total - nfail))
  failed=$((failed + nfail))
done < <(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\1 \2/p' "$log")
passed=$((passed + $(grep -o '"ok":true' "$log" | wc -l || true)))
failed=$((failed + $(grep -o '"ok":false' "$log" | wc -l || true)))
echo "summary: $passed passed, $failed failed"
[[ -z $failed_stage ]]
