#!/usr/bin/env bash
# access.sh BUILD SRC - who the daemon lets in, with real users (root only; exit 77 otherwise):
#   - alice, whose group vltest-viewlower is supplementary (usermod -aG), is admitted by
#     --allow-gid vltest-viewlower; the same alice without her supplementary groups is refused;
#   - bob, not in the group, is refused with -32006 (exit 3, "not permitted");
#   - alice, not root, with no --socket, VIEWLOWER_SOCKET or XDG socket, reaches the system
#     socket /run/viewlower/viewlower.sock (skipped when that path is already in use).
# The users, the group, the daemons and the files are removed on exit, whatever happens.
set -euo pipefail
build=$(cd "$1" && pwd)
[ "$(id -u)" = 0 ] || { echo "skip: needs root (useradd)"; exit 77; }
command -v setpriv >/dev/null && command -v useradd >/dev/null || { echo "skip: no setpriv/useradd"; exit 77; }
ctl=$build/client/viewlowerctl
daemon=$build/daemon/viewlowerd
group=vltest-viewlower
tmp=$(mktemp -d)
chmod 755 "$tmp"
pids=()
made_run_dir=
used_system_socket=
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  # the daemon leaves PATH.lock beside a socket it bound (docs/daemon.md, "Socket file")
  [ -n "$used_system_socket" ] && rm -f /run/viewlower/viewlower.sock.lock
  [ -n "$made_run_dir" ] && rmdir /run/viewlower 2>/dev/null || true
  for u in vltest-alice vltest-bob; do userdel "$u" 2>/dev/null || true; done
  groupdel "$group" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cleanup_users() { for u in vltest-alice vltest-bob; do userdel "$u" 2>/dev/null || true; done; groupdel "$group" 2>/dev/null || true; }
cleanup_users # left over from an interrupted run
groupadd --system "$group"
useradd --system --no-create-home --no-user-group --gid nogroup --shell /usr/sbin/nologin vltest-alice
useradd --system --no-create-home --no-user-group --gid nogroup --shell /usr/sbin/nologin vltest-bob
usermod -aG "$group" vltest-alice
[ "$(id -gn vltest-alice)" = nogroup ] || fail "alice's primary group is not nogroup"
id -Gn vltest-alice | grep -qw "$group" || fail "alice is not in $group"

start() { # start SOCKET: a daemon admitting root and the group, socket open to all
  "$daemon" --socket "$1" --socket-mode 0666 --allow-gid "$group" --log-level warn 2>>"$tmp/daemon.log" &
  pids+=($!)
  for _ in $(seq 200); do [ -S "$1" ] && return 0; sleep 0.02; done
  fail "viewlowerd did not start on $1"
}
as() { # as USER [setpriv flags] -- viewlowerctl args...
  local user=$1
  shift
  local flags=()
  while [ "$1" != -- ]; do flags+=("$1"); shift; done
  shift
  env -i PATH=/usr/bin:/bin setpriv --reuid "$user" --regid nogroup "${flags[@]}" "$ctl" "$@"
}

sock=$tmp/viewlower.sock
start "$sock"
out=$(as vltest-alice --init-groups -- --socket "$sock" ping) || fail "alice (supplementary group) refused: $out"
[ "$out" = '{"pong":true}' ] || fail "alice: $out"
echo "ok: a supplementary member of --allow-gid is admitted"

set +e
err=$(as vltest-alice --clear-groups -- --socket "$sock" ping 2>&1)
rc=$?
set -e
[ "$rc" = 3 ] && [[ $err == *"not permitted"* ]] || fail "alice without her groups: exit $rc: $err"
set +e
err=$(as vltest-bob --init-groups -- --socket "$sock" ping 2>&1)
rc=$?
set -e
[ "$rc" = 3 ] && [[ $err == *"not permitted"* ]] || fail "bob: exit $rc: $err"
echo "ok: a peer in no listed group is refused (exit 3, not permitted)"

if [ -e /run/viewlower/viewlower.sock ]; then
  echo "skip: /run/viewlower/viewlower.sock is in use; the fallback is not tried"
  exit 0
fi
[ -d /run/viewlower ] || { mkdir -m 0755 /run/viewlower; made_run_dir=1; }
[ -e /run/viewlower/viewlower.sock.lock ] || used_system_socket=1
start /run/viewlower/viewlower.sock
out=$(as vltest-alice --init-groups -- ping) || fail "alice did not reach the system socket: $out"
[ "$out" = '{"pong":true}' ] || fail "fallback: $out"
out=$(env XDG_RUNTIME_DIR="$tmp/none" setpriv --reuid vltest-alice --regid nogroup --init-groups "$ctl" ping) ||
  fail "alice with an XDG_RUNTIME_DIR without a socket: $out"
echo "ok: a user who is not root falls back to /run/viewlower/viewlower.sock"
