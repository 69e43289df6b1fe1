#!/usr/bin/env bash
# Installs what viewlower needs to build and test on Debian (run as root). Idempotent.
#   build: cmake ninja pkg-config gcc libuv libcjson libcmocka
#   tests: clang + libclang-rt (libFuzzer harnesses), valgrind, systemd (systemd-analyze verify of
#          the units), util-linux (setpriv), python3-torch/numpy (outside oracle for layouts),
#          bazel-bootstrap (Bazel 4.2: the examples/bazel stage, scripts/bazel-test.sh),
#          python3-torchvision + python3-pytest (the Python front end's tests and model zoo)
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config libuv1-dev libcjson-dev libcmocka-dev
          clang libclang-rt-14-dev valgrind systemd util-linux python3-torch python3-numpy bazel-bootstrap
          python3-torchvision python3-pytest)
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
