#!/usr/bin/env bash
# daemon-flags.sh BUILD SRC - viewlowerd --version, and the journald check: `<N>` priority
# prefixes only when $JOURNAL_STREAM names stderr's own device and inode (as sd-daemon does),
# not merely because the variable is set.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
d=$build/daemon/viewlowerd
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
version=$(sed -n 's/^project(viewlower VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[ "$("$d" --version)" = "viewlowerd $version (protocol 1)" ] || fail "--version: $("$d" --version)"
"$d" --help | grep -q -- '--version' || fail "--help does not list --version"
echo "ok: viewlowerd --version"

# Starts the daemon with stderr appended to LOG and JOURNAL_STREAM=$2, stops it, prints the log.
run_log() {
  local log=$1 stream=$2 pid
  JOURNAL_STREAM=$stream "$d" --socket "$tmp/s" --log-level info 2>>"$log" &
  pid=$!
  for _ in $(seq 200); do [ -S "$tmp/s" ] && break; sleep 0.02; done
  kill "$pid"
  wait "$pid" || fail "viewlowerd exited $? after SIGTERM"
  cat "$log"
}
# journal: every line has a <N> prefix and no timestamp; otherwise none has one.
journal_lines() { grep -c '^<[0-9]>' <<<"$1" || true; }
: >"$tmp/match"
out=$(run_log "$tmp/match" "$(stat -c '%d:%i' "$tmp/match")")
grep -q '^<6>listening on ' <<<"$out" || fail "stderr is the journal stream, yet: $out"
[ "$(journal_lines "$out")" = "$(wc -l <<<"$out")" ] || fail "a line without <N>: $out"
: >"$tmp/other" && : >"$tmp/elsewhere"
out=$(run_log "$tmp/other" "$(stat -c '%d:%i' "$tmp/elsewhere")")
grep -q 'viewlowerd info: listening on ' <<<"$out" || fail "another file's stream, yet: $out"
[ "$(journal_lines "$out")" = 0 ] || fail "<N> prefixes for another file's stream: $out"
: >"$tmp/junk"
out=$(run_log "$tmp/junk" "not-a-stream")
grep -q 'viewlowerd info: listening on ' <<<"$out" || fail "malformed JOURNAL_STREAM, yet: $out"
[ "$(journal_lines "$out")" = 0 ] || fail "<N> prefixes for a malformed JOURNAL_STREAM: $out"
echo "ok: <N> prefixes only when stderr is the journal stream"
