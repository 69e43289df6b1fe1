#!/usr/bin/env bash
# test-root.sh [CACHE_DIR] - builds (once) and prints the path of the minimal Debian root that
# tests/systemd boots with systemd-nspawn (root only). The root is debootstrap'ed from the
# Debian mirror this host's apt uses, with systemd and the packages the viewlower .debs and the
# test need already installed (so the test installs only viewlower's own packages, offline).
#
# Cache: CACHE_DIR (default $VL_TEST_ROOT_CACHE, else /var/cache/viewlower-test-root) holds one
# directory per root, named SUITE-ARCH-KEY, KEY a hash of the suite, architecture, variant,
# package list and this script's RECIPE version: the same list reuses the root, a changed one
# builds a new root beside it (older ones are left for `rm -rf` by hand). A build goes to a
# temporary directory renamed into place when complete, under a lock, so an interrupted or
# concurrent build never leaves a half root for a later run. The test never writes to the root:
# it boots an overlay of it.
#
# Environment: VL_DEBIAN_MIRROR (default: the first deb.debian.org-style URI of the host's apt
# sources for the suite), VL_DEBIAN_SUITE (default: the host's VERSION_CODENAME).
# Exit: 0 with the path on stdout; 1 when the build failed (the log is on stderr).
set -euo pipefail
RECIPE=1  # bump when the steps below change in a way the package list does not show
# What the root holds beyond debootstrap's minbase: systemd as init; the .debs' dependencies
# (viewlower: libuv1, libcjson1, adduser; python3-viewlower: python3); python3-torch for
# `python3 -m viewlower check` (the front end needs torch only; torchvision would add ffmpeg
# and its graphics stack); init-system-helpers for the maintainer scripts' deb-systemd-helper.
PACKAGES=(systemd init-system-helpers adduser libuv1 libcjson1 python3 python3-torch)

[ "$(id -u)" = 0 ] || { echo "test-root.sh: needs root (debootstrap, chroot)" >&2; exit 1; }
cache=${1:-${VL_TEST_ROOT_CACHE:-/var/cache/viewlower-test-root}}
suite=${VL_DEBIAN_SUITE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-}")}
[ -n "$suite" ] || { echo "test-root.sh: no VERSION_CODENAME in /etc/os-release; set VL_DEBIAN_SUITE" >&2; exit 1; }
arch=$(dpkg --print-architecture)
mirror=${VL_DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
  # deb822 (.sources) or one-line (.list) entries whose suite is $suite and path ends in /debian.
  mirror=$( (cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null || true) |
    awk -v s="$suite" '
      /^URIs:/ { for (i = 2; i <= NF; i++) if ($i ~ /\/debian\/?$/) uri = $i }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == s && uri != "") { print uri; exit } }
      /^deb / { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { if ($i ~ /\/debian\/?$/ && $(i + 1) == s) { print $i; exit } } }' )
  mirror=${mirror:-http://deb.debian.org/debian}
fi
key=$(printf '%s\n' "recipe $RECIPE" "$suite" "$arch" minbase "${PACKAGES[@]}" | sha256sum | cut -c1-12)
root=$cache/$suite-$arch-$key
if [ -x "$root/lib/systemd/systemd" ] && [ -f "$root/.viewlower-test-root" ]; then
  echo "$root"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "test-root.sh: no debootstrap (apt install debootstrap)" >&2; exit 1; }
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [ -f "$root/.viewlower-test-root" ]; then  # built by another run while this one waited
  echo "$root"
  exit 0
fi
tmp=$(mktemp -d "$cache/.build.XXXXXX")
cleanup() { umount -R "$tmp/proc" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 1' INT TERM HUP # so that the cleanup runs when the build is stopped too
log=$tmp.log
start=$SECONDS
echo "test-root.sh: building $root from $mirror ($suite, $arch): ${PACKAGES[*]}" >&2
step() { # step WHAT CMD...: runs CMD with its output in the log; on failure shows the log's end
  if ! "${@:2}" >>"$log" 2>&1; then
    echo "test-root.sh: $1 failed; the end of $log:" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
}
# minbase and systemd by debootstrap, whose resolver follows plain Depends; the rest by apt
# inside the new root (it resolves virtual packages such as python3-numpy-abi9).
step debootstrap debootstrap --variant=minbase --include=systemd,init-system-helpers \
  "$suite" "$tmp" "$mirror"
cp /etc/resolv.conf "$tmp/etc/resolv.conf" 2>/dev/null || true
mount -t proc proc "$tmp/proc"
inroot() { chroot "$tmp" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }
step "apt-get update" inroot apt-get update -qq
step "apt-get install" inroot apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}"
step "apt-get clean" inroot apt-get clean
umount "$tmp/proc"
rm -rf "$tmp"/var/lib/apt/lists/* "$tmp/etc/resolv.conf"
# A quiet, quick boot: no login prompt on the console, no apt timers, no network setup.
for unit in console-getty.service getty@.service apt-daily.timer apt-daily-upgrade.timer \
            systemd-networkd.service systemd-networkd-wait-online.service; do
  ln -sf /dev/null "$tmp/etc/systemd/system/$unit"
done
echo viewlower-test >"$tmp/etc/hostname"
: >"$tmp/etc/machine-id"  # a fresh one at each boot
printf '%s\n' "recipe $RECIPE" "suite $suite" "arch $arch" "mirror $mirror" \
  "packages ${PACKAGES[*]}" "built $(date -u +%FT%TZ) in $((SECONDS - start)) s" \
  "size $(du -sm "$tmp" | cut -f1) MiB" >"$tmp/.viewlower-test-root"
mv "$tmp" "$root"
rm -f "$log"
trap - EXIT
echo "test-root.sh: built $root in $((SECONDS - start)) s ($(du -sm "$root" | cut -f1) MiB)" >&2
echo "$root"
