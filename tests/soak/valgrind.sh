#!/usr/bin/env bash
# valgrind.sh - viewlowerd under valgrind (memcheck, full leak check) serves a few hundred mixed
# requests from viewlower-load, then SIGTERM: the daemon must exit 0 with no memory error and
# no leak. Exit 77 (skipped) when valgrind is not installed.
#
#   valgrind.sh VIEWLOWERD VIEWLOWER_LOAD
set -euo pipefail
daemon=$1
load=$2
if ! command -v valgrind >/dev/null; then
  echo "valgrind not installed: skipped (scripts/install-deps.sh installs it)"
  exit 77
fi
# shellcheck source=tmpdir.sh
. "$(dirname "$0")/tmpdir.sh" vlgrind
fail() {
  echo "valgrind: FAILED: $*" >&2
  tail -n 80 "$dir/valgrind.log" >&2 || true
  exit 1
}

valgrind --leak-check=full --error-exitcode=1 --errors-for-leak-kinds=definite,indirect,possible \
  --log-file="$dir/valgrind.log" \
  "$daemon" --socket "$dir/viewlower.sock" --workers 2 --log-level warn 2>"$dir/daemon.log" &
pid=$!
for _ in $(seq 300); do [ -S "$dir/viewlower.sock" ] && break; sleep 0.1; done
[ -S "$dir/viewlower.sock" ] || fail "the daemon did not create its socket under valgrind"

rc=0
"$load" --socket "$dir/viewlower.sock" --clients 4 --pipeline 3 --requests 100 --reconnect-every 30 \
  --invalid-pct 30 --seed 5 --timeout-ms 120000 --check >"$dir/report.json" || rc=$?
echo "load report: $(cat "$dir/report.json")"
[ "$rc" -eq 0 ] || fail "viewlower-load --check failed (exit $rc)"

kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=
grep -E "ERROR SUMMARY|in use at exit|total heap usage|definitely|indirectly|possibly|All heap" \
  "$dir/valgrind.log" || true
[ "$status" -eq 0 ] || fail "viewlowerd under valgrind exited with $status after SIGTERM"
grep -q "ERROR SUMMARY: 0 errors" "$dir/valgrind.log" || fail "valgrind reported errors"
echo "valgrind: ok"
