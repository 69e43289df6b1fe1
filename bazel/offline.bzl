"""Offline stand-ins for the repositories Bazel 4's built-in tools load.

Bazel 4.2's @bazel_tools loads @rules_cc//cc:defs.bzl (C/C++ toolchain set-up),
@rules_java//java:defs.bzl (Java toolchain registration, parsed even when no Java is built) and
@remote_coverage_tools (test rules' coverage tools), and would download all three. The stand-ins
under bazel/offline/ forward to the rules built into Bazel; coverage tools fail with a message,
since `bazel coverage` is not offered. Call from a WORKSPACE with the path of viewlower's root
relative to that workspace.
"""

def viewlower_offline_repositories(root):
    for name in ["rules_cc", "rules_java", "remote_coverage_tools"]:
        native.local_repository(name = name, path = root + "/bazel/offline/" + name)
