#!/usr/bin/env bash
# install.sh BUILD SRC - `cmake --install` of BUILD into a temporary prefix, then checks what an
# operator and a developer meet there:
#   - the installed viewlowerctl and viewlowerd run with no ldconfig and no LD_LIBRARY_PATH
#     (their runpath finds the installed libraries) and print --version;
#   - the units name the prefix's sbin/viewlowerd and pass `systemd-analyze verify`;
#   - the man pages render with `man -l` without a warning;
#   - a program outside the tree builds against the installed core and client, once with
#     find_package(viewlower) and once with pkg-config, and runs: it lowers in process and pings
#     the installed daemon.
# Everything lives in one temporary directory, removed on exit with the daemon stopped.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
tmp=$(mktemp -d)
daemon=
cleanup() {
  if [ -n "$daemon" ]; then kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
expect() { # expect WHAT EXPECTED ACTUAL
  [ "$2" = "$3" ] || fail "$1: expected '$2', got '$3'"
  echo "ok: $1"
}

prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
version=$(sed -n 's/^project(viewlower VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
libdir=$(dirname "$(find "$prefix" -name libviewlower.so.2 | head -n 1)")
[ -n "$libdir" ] || fail "libviewlower.so.2 is not installed"
[ -e "$prefix/bin/viewlower-bench" ] && fail "viewlower-bench is installed into bin/"

expect "viewlowerctl --version (runpath, no ldconfig)" "viewlowerctl $version" \
  "$(env -u LD_LIBRARY_PATH "$prefix/bin/viewlowerctl" --version)"
expect "viewlowerd --version" "viewlowerd $version (protocol 1)" \
  "$(env -u LD_LIBRARY_PATH "$prefix/sbin/viewlowerd" --version)"

units=$prefix/lib/systemd/system
expect "ExecStart names the prefix" "ExecStart=$prefix/sbin/viewlowerd" \
  "$(grep -o '^ExecStart=[^ ]*' "$units/viewlowerd.service")"
grep -q '@VL_' "$units/viewlowerd.service" "$units/viewlowerd.socket" && fail "a placeholder is left in the units"
# The socket's directory belongs to the socket unit alone: a RuntimeDirectory= in the service
# would have systemd re-own it (and the socket in it) to the dynamic user at each start.
grep -q '^RuntimeDirectory' "$units/viewlowerd.service" && fail "the service has a RuntimeDirectory="
expect "the socket unit owns the socket" "ListenStream=/run/viewlower/viewlower.sock SocketGroup=viewlower SocketMode=0660" \
  "$(grep -E '^(ListenStream|SocketGroup|SocketMode)=' "$units/viewlowerd.socket" | sort | tr '\n' ' ' | sed 's/ $//')"
if command -v systemd-analyze >/dev/null; then
  out=$(systemd-analyze verify --man=no "$units/viewlowerd.socket" "$units/viewlowerd.service" 2>&1) ||
    fail "systemd-analyze verify: $out"
  [ -z "$out" ] || fail "systemd-analyze verify: $out"
  echo "ok: systemd-analyze verify of the installed units"
fi

command -v man >/dev/null || fail "man (Debian man-db) is needed to check the man pages"
for page in man1/viewlowerctl.1.gz man8/viewlowerd.8.gz; do
  [ -f "$prefix/share/man/$page" ] || fail "$page is not installed"
  warnings=$(MANWIDTH=80 man --warnings -E UTF-8 -l "$prefix/share/man/$page" 2>&1 >/dev/null)
  [ -z "$warnings" ] || fail "man -l $page: $warnings"
  lines=$(MANWIDTH=80 man -E UTF-8 -l "$prefix/share/man/$page" 2>/dev/null | wc -l)
  [ "$lines" -gt 40 ] || fail "man -l $page renders only $lines lines"
  echo "ok: man -l $page renders ($lines lines, no warnings)"
done

# The man pages keep up with the programs: every flag of viewlowerd --help and every command of
# viewlowerctl --help is in its page.
render() { MANWIDTH=1000 man --nh --nj -E ascii -l "$1" 2>/dev/null; }
dpage=$(render "$prefix/share/man/man8/viewlowerd.8.gz")
for flag in $("$prefix/sbin/viewlowerd" --help | sed -n 's/^  \(--[a-z-]*\).*/\1/p'); do
  grep -qF -- "$flag" <<<"$dpage" || fail "viewlowerd(8) does not document $flag"
done
cpage=$(render "$prefix/share/man/man1/viewlowerctl.1.gz")
for cmd in $("$prefix/bin/viewlowerctl" --help | sed -n 's/^  \([a-z][a-z-]*\).*/\1/p'); do
  grep -qE "^ +$cmd( |$)" <<<"$cpage" || fail "viewlowerctl(1) does not document the command $cmd"
done
echo "ok: the man pages document every flag of viewlowerd and every command of viewlowerctl"

sock=$tmp/viewlower.sock
"$prefix/sbin/viewlowerd" --socket "$sock" --log-level warn &
daemon=$!
for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || fail "the installed viewlowerd did not start"

want="core $version: replaced 1, bytes_saved 96
client: pong from viewlowerd $version"
cmake -S "$src/tests/packaging/consumer" -B "$tmp/consumer-cmake" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/consumer-cmake" >/dev/null
expect "find_package(viewlower) consumer" "$want" "$("$tmp/consumer-cmake/consumer" "$sock")"

export PKG_CONFIG_PATH=$libdir/pkgconfig
cc -std=c11 -Wall -Werror -o "$tmp/consumer-pc" "$src/tests/packaging/consumer/consumer.c" \
  $(pkg-config --cflags viewlower viewlower-client) \
  $(pkg-config --libs viewlower viewlower-client) -Wl,-rpath,"$libdir"
expect "pkg-config consumer" "$want" "$("$tmp/consumer-pc" "$sock")"
expect "pkg-config prefix is relocatable" "$prefix/include" \
  "$(pkg-config --variable=includedir viewlower | xargs realpath)"
