#!/bin/sh
echo "bazel coverage is not available offline (viewlower ships no coverage tools)" >&2
exit 1
