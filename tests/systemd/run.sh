#!/usr/bin/env bash
# run.sh BUILD SRC VIEWLOWERCTL - viewlower under a real systemd (ctest label systemd; root only):
#   1. builds the .deb packages (scripts/package.sh, CPack) in BUILD/systemd-deb;
#   2. takes the cached minimal Debian root of scripts/test-root.sh (debootstrap'ed once);
#   3. computes what the packaged programs must answer with this build's VIEWLOWERCTL --local
#      (the example graphs' lowerings, explanations and legacy verdicts) and with the source
#      tree's front end (one `python3 -m viewlower check`), when the host has torch;
#   4. boots an overlay of the root (the cache is never written) with systemd-nspawn --boot, where
#      a unit runs inside.sh against the real systemd: it installs the packages, checks
#      activation, notify, watchdog, restart, drain, socket owner and access, journald, the
#      security exposure, the demo graphs, the Python front end and the purge, then ends the
#      container with `systemctl exit RC`, which nspawn returns.
# Exit 77 (ctest SKIP) with one line saying why when nspawn cannot run here.
# Environment: VL_TEST_ROOT_CACHE (where the root is cached, default /var/cache/viewlower-test-root).
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
ctl=$3
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

[ "$(id -u)" = 0 ] || skip "needs root (systemd-nspawn, mounts, dpkg)"
command -v systemd-nspawn >/dev/null || skip "no systemd-nspawn (apt install systemd-container)"
command -v unshare >/dev/null || skip "no unshare"
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || true
grep -qw overlay /proc/filesystems || skip "no overlayfs in this kernel"
cache=${VL_TEST_ROOT_CACHE:-/var/cache/viewlower-test-root}

t_all=$(now)
work=$build/systemd-test
rm -rf "$work"
mkdir -p "$work/out" "$work/payload/debs" "$work/payload/expected" "$work/payload/graphs"

t=$(now)
"$src/scripts/package.sh" "$build/systemd-deb" >"$work/package.log" 2>&1 || { tail -n 40 "$work/package.log"; fail "package build"; }
version=$(sed -n 's/^project(viewlower VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
arch=$(dpkg --print-architecture)
cp "$build/systemd-deb/viewlower_${version}_${arch}.deb" \
   "$build/systemd-deb/python3-viewlower_${version}_all.deb" "$work/payload/debs/" || fail "packages missing"
echo "packages built in $(since "$t") s"

t=$(now)
if ! root=$("$src/scripts/test-root.sh" "$cache"); then
  command -v debootstrap >/dev/null || skip "no cached test root and no debootstrap to build one (apt install debootstrap)"
  fail "building the test root (scripts/test-root.sh)"
fi
echo "root $root ready in $(since "$t") s: $(grep -E '^(built|size)' "$root/.viewlower-test-root" | tr '\n' ' ')"

# Probe: can nspawn run a command in the root here at all?
if ! probe=$(systemd-nspawn --register=no --keep-unit --quiet -D "$root" --read-only /bin/true 2>&1); then
  skip "systemd-nspawn cannot run here: $(head -n 3 <<<"$probe" | tr '\n' ' ')"
fi

# What the packaged programs must answer: this build's library, in process.
for g in "$src"/examples/graphs/*.json; do
  n=$(basename "$g" .json)
  cp "$g" "$work/payload/graphs/"
  "$ctl" --local lower "$g" >"$work/payload/expected/$n.lowered" || fail "--local lower $n"
  "$ctl" --local explain "$g" >"$work/payload/expected/$n.explain" || fail "--local explain $n"
  rc=0
  "$ctl" --local verify "$g" --seed 1 --policy legacy >/dev/null || rc=$?
  echo "$rc" >"$work/payload/expected/$n.legacy_rc"
done
check_args=(viewlower.models:patch_embed --input 1,3,16,16 --channels-last)
echo "${check_args[*]}" >"$work/payload/check_args"
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  (cd / && PYTHONPATH=$src/python PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -m viewlower check \
     "${check_args[@]}" --local --viewlowerctl "$ctl") >"$work/payload/expected/check" || fail "host check"
fi
# The exposure docs/deployment.md promises.
exposure=$(sed -n 's/.*exposure level of at most \*\*\([0-9.]*\)\*\*.*/\1/p' "$src/docs/deployment.md" | head -n 1)
[ -n "$exposure" ] || fail "docs/deployment.md states no 'exposure level of at most **N**'"
echo "$exposure" >"$work/payload/exposure"
cp "$src/tests/systemd/inside.sh" "$work/payload/"
mkdir -p "$work/payload/out"

# The container: an overlay of the cached root, in a private mount namespace (gone on exit).
t=$(now)
rc=0
unshare --mount --propagation private bash -c '
  set -e
  root=$1 work=$2
  mkdir -p "$work/upper" "$work/ovl" "$work/merged"
  mount -t overlay overlay -o "lowerdir=$root,upperdir=$work/upper,workdir=$work/ovl" "$work/merged"
  m=$work/merged
  cp -a "$work/payload" "$m/vltest"
  cat >"$m/etc/systemd/system/vltest.service" <<UNIT
[Unit]
Description=viewlower under systemd: tests/systemd/inside.sh
After=multi-user.target
[Service]
Type=exec
ExecStart=/bin/bash /vltest/inside.sh
StandardOutput=append:/vltest/out/log
StandardError=inherit
UNIT
  mkdir -p "$m/etc/systemd/system/multi-user.target.wants"
  ln -s /etc/systemd/system/vltest.service "$m/etc/systemd/system/multi-user.target.wants/vltest.service"
  set +e
  date +%s.%N >"$m/vltest/start"
  timeout --kill-after=10 900 systemd-nspawn --register=no --keep-unit --quiet -D "$m" \
    --boot --console=read-only -- systemd.show_status=no >"$work/console.log" 2>&1
  rc=$?
  cp -a "$m/vltest/out/." "$work/out/" 2>/dev/null
  exit $rc
' _ "$root" "$work" || rc=$?
boot=$(since "$t")
cat "$work/out/log" 2>/dev/null || echo "(inside.sh wrote no log)"
if [ "$rc" != 0 ]; then
  echo "--- console (last 40 lines)"
  tail -n 40 "$work/console.log"
  fail "the container exited $rc"
fi
grep -q '^inside: all checks passed' "$work/out/log" || fail "inside.sh did not finish"
echo "boot, checks and shutdown in $boot s; whole test $(since "$t_all") s"
