#!/usr/bin/env bash
# check-hardening.sh BUILD SRC - the release hardening of the shipped binaries, read with readelf
# from an install of BUILD into a temporary prefix (the build tree's own files carry the build
# tree's runpath, which the install replaces):
# full RELRO (GNU_RELRO segment + BIND_NOW), PIE executables, the stack protector
# (__stack_chk_fail), _FORTIFY_SOURCE (__*_chk calls), and no build path (SRC or BUILD) anywhere
# in the files, debug information included (-ffile-prefix-map).
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
status=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/p" >/dev/null
fail() { echo "FAIL: $*" >&2; status=1; }

check() { # check FILE KIND (exe|lib)
  local f=$1 kind=$2 name ok=1 dyn hdr seg syms
  name=${f#"$tmp/p"/}
  # Read once: grep -q on a pipe would stop readelf early (SIGPIPE, a failure under pipefail).
  seg=$(readelf -lW "$f") dyn=$(readelf -dW "$f") hdr=$(readelf -hW "$f") syms=$(readelf --dyn-syms -W "$f")
  grep -q GNU_RELRO <<<"$seg" || { fail "$name: no GNU_RELRO segment"; ok=0; }
  grep -Eq '\(FLAGS\).*BIND_NOW|\(FLAGS_1\).*NOW' <<<"$dyn" || { fail "$name: not linked with -z now"; ok=0; }
  if [ "$kind" = exe ]; then
    grep -Eq 'Type:[[:space:]]+DYN' <<<"$hdr" || { fail "$name: not a position-independent executable"; ok=0; }
    grep -Eq '\(FLAGS_1\).*PIE' <<<"$dyn" || { fail "$name: no PIE flag"; ok=0; }
    grep -q '__stack_chk_fail' <<<"$syms" || { fail "$name: no stack protector"; ok=0; }
    grep -Eq '__[a-z]+_chk' <<<"$syms" || { fail "$name: no fortified calls"; ok=0; }
  fi
  if grep -aqF -e "$src/" -e "$build/" "$f"; then
    fail "$name: embeds a build path"
    ok=0
  fi
  [ "$ok" = 1 ] && echo "ok: $name"
  return 0
}

check "$tmp/p/sbin/viewlowerd" exe
check "$tmp/p/bin/viewlowerctl" exe
for lib in libviewlower.so.2 libviewlower-client.so.0; do
  check "$(find "$tmp/p" -name "$lib" | head -n 1)" lib
done
exit "$status"
