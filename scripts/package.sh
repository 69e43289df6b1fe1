#!/usr/bin/env bash
# package.sh [BUILD_DIR] - builds the Debian packages viewlower and viewlower-dev with CPack:
# configures a Release-with-debug-info tree for the prefix /usr (default build-deb/), builds
# it and runs `cpack -G DEB`; the .deb files land in BUILD_DIR. Install with
# `apt install ./BUILD_DIR/viewlower_*.deb` (docs/deployment.md).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-deb}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
  -DVL_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j "$(nproc)"
(cd "$build" && cpack -G DEB)
ls "$build"/*.deb
