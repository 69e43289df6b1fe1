#!/usr/bin/env bash
# deb.sh BUILD SRC - the Debian packages (root only; exit 77 otherwise):
#   1. configures SRC for /usr in a fresh tree, builds it and runs `cpack -G DEB`
#      (scripts/package.sh does the same by hand);
#   2. checks both packages' contents and control data with dpkg-deb -c / -I, and runs lintian
#      when it is installed (its report is printed; an error tag fails the test);
#   3. installs them with dpkg into a throwaway root: a copy-on-write overlay of this system
#      in a private mount namespace, so the maintainer scripts run for real (group created,
#      socket enabled) and nothing reaches the host; there it runs viewlowerctl --version,
#      pings the installed viewlowerd, verifies the units, builds a program against
#      viewlower-dev with find_package and pkg-config, then purges both packages.
set -euo pipefail
src=$(cd "$2" && pwd)
[ "$(id -u)" = 0 ] || { echo "skip: needs root (mount namespace, dpkg)"; exit 77; }
for tool in dpkg-deb cpack unshare chroot; do
  command -v "$tool" >/dev/null || { echo "skip: no $tool"; exit 77; }
done
tmp=$(mktemp -d)
trap 'umount -R "$tmp/root" 2>/dev/null || true; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$src/scripts/package.sh" "$tmp/build" >"$tmp/package.log" 2>&1 || { cat "$tmp/package.log"; fail "package build"; }
version=$(sed -n 's/^project(viewlower VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
run_deb=$tmp/build/viewlower_${version}_${arch}.deb
dev_deb=$tmp/build/viewlower-dev_${version}_${arch}.deb
py_deb=$tmp/build/python3-viewlower_${version}_all.deb
[ -f "$run_deb" ] && [ -f "$dev_deb" ] && [ -f "$py_deb" ] || fail "packages missing: $(ls "$tmp/build"/*.deb 2>&1)"

contents() { dpkg-deb -c "$1" | awk '{print $6}' | sed 's|^\./|/|; s| ->.*||'; }
has() { # has DEB PATH...
  local deb=$1 list
  shift
  list=$(contents "$deb")
  for p in "$@"; do grep -qxF "$p" <<<"$list" || fail "$(basename "$deb") lacks $p"; done
}
has "$run_deb" /usr/sbin/viewlowerd /usr/bin/viewlowerctl \
  "/usr/lib/$multiarch/libviewlower.so.2" "/usr/lib/$multiarch/libviewlower-client.so.0" \
  /lib/systemd/system/viewlowerd.socket /lib/systemd/system/viewlowerd.service \
  /usr/lib/sysusers.d/viewlower.conf /usr/share/man/man8/viewlowerd.8.gz \
  /usr/share/man/man1/viewlowerctl.1.gz /usr/share/doc/viewlower/copyright \
  /usr/share/doc/viewlower/changelog.gz /usr/share/doc/viewlower/protocol.md \
  /usr/share/doc/viewlower/format.md /usr/share/bash-completion/completions/viewlowerctl \
  /usr/share/zsh/vendor-completions/_viewlowerctl
has "$dev_deb" /usr/include/viewlower/client.h /usr/include/viewlower/graph.h \
  "/usr/lib/$multiarch/libviewlower.so" "/usr/lib/$multiarch/pkgconfig/viewlower.pc" \
  "/usr/lib/$multiarch/pkgconfig/viewlower-client.pc" \
  "/usr/lib/$multiarch/cmake/viewlower/viewlower-config.cmake" /usr/share/doc/viewlower-dev/copyright
has "$py_deb" /usr/lib/python3/dist-packages/viewlower/__init__.py /usr/share/doc/python3-viewlower/copyright
contents "$run_deb" | grep -q viewlower-bench && fail "viewlower-bench is packaged"
contents "$run_deb" | grep -q 'python3' && fail "Python files in the runtime package"
contents "$run_deb" | grep -q '^/usr/include' && fail "headers in the runtime package"
info=$(dpkg-deb -I "$run_deb")
for field in "Package: viewlower" "Version: $version" "Depends: " "Section: devel"; do
  grep -q "^ $field" <<<"$info" || fail "control lacks '$field'"
done
for script in postinst prerm postrm shlibs triggers; do
  grep -qw "$script" <<<"$info" || fail "control has no $script"
done
grep -q "^ Depends: .*viewlower (= $version)" <<<"$(dpkg-deb -I "$dev_deb")" || fail "viewlower-dev does not depend on viewlower (= $version)"
echo "ok: package contents and control data"

if command -v lintian >/dev/null; then
  report=$(lintian --tag-display-limit 0 "$run_deb" "$dev_deb" "$py_deb" 2>&1 || true)
  echo "lintian:"
  echo "${report:-  (no tags)}" | sed 's/^/  /'
  grep -q '^E: ' <<<"$report" && fail "lintian reports errors"
  echo "ok: lintian reports no error"
else
  echo "note: lintian is not installed; its check was skipped"
fi

# The throwaway root: / as the lower layer of an overlay, changes kept in $tmp/up.
mkdir -p "$tmp/up" "$tmp/work" "$tmp/root"
cp "$run_deb" "$dev_deb" "$py_deb" "$src/tests/packaging/consumer/consumer.c" \
   "$src/tests/packaging/consumer/CMakeLists.txt" "$tmp/"
cat >"$tmp/inside.sh" <<INSIDE
set -euo pipefail
fail() { echo "FAIL (installed): \$*" >&2; exit 1; }
# A failed check must not leave the daemon started below holding the test's output open (ctest
# would wait for it until the timeout).
pid=
trap 'if [ -n "\$pid" ]; then kill "\$pid" 2>/dev/null || true; fi' EXIT
cd /pkg
dpkg -i viewlower_${version}_${arch}.deb viewlower-dev_${version}_${arch}.deb python3-viewlower_${version}_all.deb >/dev/null
getent group viewlower >/dev/null || fail "postinst did not create the group viewlower"
[ -L /etc/systemd/system/sockets.target.wants/viewlowerd.socket ] || fail "viewlowerd.socket is not enabled"
[ ! -e /etc/systemd/system/multi-user.target.wants/viewlowerd.service ] || fail "the service is enabled on its own"
[ "\$(viewlowerctl --version)" = "viewlowerctl $version" ] || fail "viewlowerctl --version"
grep -qx 'ExecStart=/usr/sbin/viewlowerd --allow-uid=0 --allow-gid=viewlower --log-level=info --worker-nice=10' /lib/systemd/system/viewlowerd.service || fail "ExecStart"
out=\$(systemd-analyze verify --man=no /lib/systemd/system/viewlowerd.socket /lib/systemd/system/viewlowerd.service 2>&1) || fail "systemd-analyze verify: \$out"
/usr/sbin/viewlowerd --socket /tmp/vl.sock --log-level warn & pid=\$!
for _ in \$(seq 200); do [ -S /tmp/vl.sock ] && break; sleep 0.02; done
[ "\$(viewlowerctl --socket /tmp/vl.sock ping)" = '{"pong":true}' ] || fail "ping"
mkdir /tmp/c && cp consumer.c CMakeLists.txt /tmp/c/
cmake -S /tmp/c -B /tmp/c/build -G Ninja >/dev/null && cmake --build /tmp/c/build >/dev/null
/tmp/c/build/consumer /tmp/vl.sock | grep -q '^client: pong' || fail "find_package consumer"
cc -o /tmp/c/pc /tmp/c/consumer.c \$(pkg-config --cflags --libs viewlower viewlower-client)
/tmp/c/pc /tmp/vl.sock | grep -q '^core $version: replaced 1' || fail "pkg-config consumer"
kill \$pid; wait \$pid; pid=
cd / && python3 -c 'import viewlower' || fail "python3 cannot import the installed viewlower"
dpkg --purge python3-viewlower viewlower-dev viewlower >/dev/null
[ ! -e /usr/sbin/viewlowerd ] && [ ! -e /etc/systemd/system/sockets.target.wants/viewlowerd.socket ] || fail "purge left files"
echo "ok: installed into a throwaway root: group, enabled socket, --version, ping, units, -dev consumers, python import, purge"
INSIDE
unshare --mount --propagation private bash -c "
  set -e
  mount -t overlay overlay -o lowerdir=/,upperdir='$tmp/up',workdir='$tmp/work' '$tmp/root'
  mount -t proc proc '$tmp/root/proc'
  mount -t tmpfs tmpfs '$tmp/root/tmp'
  mount -t tmpfs tmpfs '$tmp/root/run'
  mkdir '$tmp/root/pkg'
  cp '$tmp'/*.deb '$tmp/consumer.c' '$tmp/CMakeLists.txt' '$tmp/inside.sh' '$tmp/root/pkg/'
  chroot '$tmp/root' env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root bash /pkg/inside.sh
"
