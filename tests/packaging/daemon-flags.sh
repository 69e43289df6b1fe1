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

# Starts the daemon with stderr appended to LOG and JOURNAL_STREAM=$2, stops it, prints the
# line that announces the socket (other records, e.g. the memory budget, may come before it).
listen_line() {
  local log=$1 stream=$2 pid
  JOURNAL_STREAM=$stream "$d" --socket "$tmp/s" --log-level info 2>>"$log" &
  pid=$!
  for _ in $(seq 200); do [ -S "$tmp/s" ] && break; sleep 0.02; done
  kill "$pid"
  wait "$pid" || fail "viewlowerd exited $? after SIGTERM"
  grep -m 1 "listening on " "$log" || true
}
: >"$tmp/match"
line=$(listen_line "$tmp/match" "$(stat -c '%d:%i' "$tmp/match")")
[[ $line == "<6>listening on "* ]] || fail "stderr is the journal stream, yet: $line"
: >"$tmp/other" && : >"$tmp/elsewhere"
line=$(listen_line "$tmp/other" "$(stat -c '%d:%i' "$tmp/elsewhere")")
[[ $line == *"viewlowerd info: listening on "* ]] || fail "another file's stream, yet: $line"
: >"$tmp/junk"
line=$(listen_line "$tmp/junk" "not-a-stream")
[[ $line == *"viewlowerd info: listening on "* ]] || fail "malformed JOURNAL_STREAM, yet: $line"
echo "ok: <N> prefixes only when stderr is the journal stream"
