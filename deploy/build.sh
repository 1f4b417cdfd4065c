#!/bin/sh
# Configures and builds iotrace into BUILD_DIR (default: build) with the
# given extra CMake arguments.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$top/build}
[ $# -gt 0 ] && shift
cmake -S "$top" -B "$dir" -DIOTRACE_WERROR=ON "$@" >/dev/null
cmake --build "$dir" -j "$(nproc 2>/dev/null || echo 2)"
