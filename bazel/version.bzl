"""The project version, as CMakeLists.txt's project(VERSION) (scripts/bazel-test.sh checks)."""

VL_VERSION = "0.3.0"
