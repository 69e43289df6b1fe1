#!/usr/bin/env bash
# run.sh BUILD SRC - the build-system example, in CI: starts viewlowerd (2 workers) on a
# temporary socket, lowers examples/make/graphs with `make -j4`, then again with ninja -j4, and
# checks that every output is byte for byte what `viewlowerctl --local lower` prints, that the
# daemon answered each request (stats), and that a second make has nothing to do.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
ctl=$build/client/viewlowerctl
here=$src/examples/make
tmp=$(mktemp -d)
daemon=
cleanup() {
  if [ -n "$daemon" ]; then kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

sock=$tmp/viewlower.sock
"$build/daemon/viewlowerd" --socket "$sock" --workers 2 --log-level warn &
daemon=$!
for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.02; done
[ -S "$sock" ] || fail "viewlowerd did not start"

n=$(ls "$here"/graphs/*.json | wc -l)
same_as_local() { # same_as_local OUTDIR
  for g in "$here"/graphs/*.json; do
    cmp -s <("$ctl" --local lower "$g") "$1/$(basename "$g")" || fail "$1/$(basename "$g") differs from --local"
  done
}

make -s -j4 -C "$here" GRAPHS="$here/graphs" OUT="$tmp/make" CTL="$ctl" SOCKET="$sock"
[ "$(ls "$tmp/make" | wc -l)" = "$n" ] || fail "make wrote $(ls "$tmp/make" | wc -l) of $n results"
same_as_local "$tmp/make"
again=$(make -j4 -C "$here" GRAPHS="$here/graphs" OUT="$tmp/make" CTL="$ctl" SOCKET="$sock")
grep -q "Nothing to be done" <<<"$again" || fail "a second make lowered again: $again"
echo "ok: make -j4 lowered $n graphs through viewlowerd; a second run has nothing to do"

if command -v ninja >/dev/null; then
  mkdir "$tmp/ninja"
  "$here/gen-ninja.sh" "$here/graphs" "$tmp/ninja/out" "$ctl" "$sock" >"$tmp/ninja/build.ninja"
  ninja -C "$tmp/ninja" -j4 >/dev/null
  same_as_local "$tmp/ninja/out"
  echo "ok: ninja -j4 lowered the same $n graphs, the same bytes"
  want=$((2 * n))
else
  want=$n
fi
lowered=$("$ctl" --socket "$sock" stats | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"]["by_method"]["lower"]["requests"])')
[ "$lowered" = "$want" ] || fail "the daemon answered $lowered lower requests, not $want"
echo "ok: the daemon answered all $want lower requests"
