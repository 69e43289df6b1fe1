#!/usr/bin/env bash
# install-deps.sh [demo|test] - installs what is missing on Debian (run as root). Idempotent.
#   demo: what scripts/demo.sh needs to build and run the daemon and the CLI (no test tools):
#         gcc, cmake, ninja, pkg-config, libuv, libcjson
#   test (default): demo's, plus what scripts/test.sh needs: libcmocka (unit tests), clang +
#         libclang-rt (libFuzzer harnesses), valgrind, systemd (systemd-analyze verify of the
#         units), util-linux (setpriv), python3-torch/numpy (outside oracle for layouts),
#         bazel-bootstrap (Bazel 4.2: the examples/bazel stage, scripts/bazel-test.sh),
#         python3-torchvision + python3-pytest (the Python front end's tests and model zoo),
#         lintian + man-db (the package and man page checks of tests/packaging), graphviz
#         (`dot`: renders `viewlowerctl explain --format dot` in tests/docs), zsh (parses the zsh
#         completion in tests/docs), systemd-container + debootstrap (tests/systemd: the .debs
#         under a booted systemd in systemd-nspawn, on a Debian root scripts/test-root.sh
#         debootstraps once and caches)
set -euo pipefail
demo=(build-essential cmake ninja-build pkg-config libuv1-dev libcjson-dev)
test=(libcmocka-dev clang libclang-rt-14-dev valgrind systemd util-linux python3-torch python3-numpy
      bazel-bootstrap python3-torchvision python3-pytest lintian man-db graphviz zsh
      systemd-container debootstrap)
case ${1:-test} in
  demo) packages=("${demo[@]}") ;;
  test) packages=("${demo[@]}" "${test[@]}") ;;
  *) echo "usage: $0 [demo|test]" >&2; exit 64 ;;
esac
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
