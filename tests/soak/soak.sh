#!/usr/bin/env bash
# soak.sh - the soak test: a real viewlowerd on a temporary socket under viewlower-load with 64
# clients of mixed valid and invalid traffic (pipelined, reconnecting every 100 requests) for a
# 10 s warm-up and a 30 s main phase. Fails on any lost or mismatched response, unexpected
# outcome or transport error, a daemon crash, RSS growth over 10% between the idle daemon after
# the warm-up and after the main phase, fds not back to baseline once the clients leave, or a
# SIGTERM that does not end the daemon with exit 0.
#
#   soak.sh VIEWLOWERD VIEWLOWER_LOAD [--no-rss-check]   (environment: SOAK_WARMUP_MS,
#   SOAK_DURATION_MS, SOAK_CLIENTS override the defaults)
set -euo pipefail
daemon=$1
load=$2
rss_limit=10
[ "${3:-}" = --no-rss-check ] && rss_limit=1000000  # sanitizer builds: ASan's quarantine grows
# shellcheck source=tmpdir.sh
. "$(dirname "$0")/tmpdir.sh" vlsoak
fail() {
  echo "soak: FAILED: $*" >&2
  echo "--- daemon log (last 40 lines)" >&2
  tail -n 40 "$dir/daemon.log" >&2 || true
  exit 1
}

# The environment the shipped unit gives the daemon (systemd/viewlowerd.service): no per-thread
# malloc caches, which otherwise fill slowly and read as growth (docs/daemon.md, "Memory").
GLIBC_TUNABLES=glibc.malloc.tcache_count=0 \
  "$daemon" --socket "$dir/viewlower.sock" --log-level warn 2>"$dir/daemon.log" &
pid=$!
for _ in $(seq 100); do [ -S "$dir/viewlower.sock" ] && break; sleep 0.1; done
[ -S "$dir/viewlower.sock" ] || fail "the daemon did not create its socket"

rc=0
"$load" --socket "$dir/viewlower.sock" --clients "${SOAK_CLIENTS:-64}" --pipeline 4 \
  --warmup-ms "${SOAK_WARMUP_MS:-10000}" --duration-ms "${SOAK_DURATION_MS:-30000}" \
  --reconnect-every 100 --invalid-pct 30 --daemon-pid "$pid" --check \
  --max-rss-growth-pct "$rss_limit" --timeout-ms 60000 >"$dir/report.json" || rc=$?
echo "soak report: $(cat "$dir/report.json")"
kill -0 "$pid" 2>/dev/null || fail "the daemon died under load"
[ "$rc" -eq 0 ] || fail "viewlower-load --check failed (exit $rc), see \"failures\" above"

kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=
[ "$status" -eq 0 ] || fail "the daemon exited with $status after SIGTERM"
[ ! -e "$dir/viewlower.sock" ] || fail "the daemon left its socket file behind"
echo "soak: ok"
