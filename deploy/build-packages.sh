#!/bin/sh
# Builds the Debian packages (deploy/packaging.cmake) into OUT_DIR (default
# build-packages/): a build configured for /usr and /etc, only the targets
# the packages hold, then cpack: the seven packages and the -dbgsym
# packages (.ddeb) of the six with binaries.
#   deploy/build-packages.sh [OUT_DIR]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$top/build-packages}
cmake -S "$top" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIOTRACE_WERROR=ON \
    -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_SYSCONFDIR=/etc >/dev/null
targets="iotrace-agent iotrace-collector iotrace-export iotrace-client iotrace-server-lib man-pages"
if grep -q '^IOTRACE_GLUSTER:BOOL=ON' "$dir/CMakeCache.txt"; then
    targets="$targets xlator-iotrace-client xlator-iotrace-server"
fi
# shellcheck disable=SC2086
cmake --build "$dir" -j "$(nproc 2>/dev/null || echo 2)" --target $targets
(cd "$dir" && cpack -G DEB >/dev/null)
ls "$dir"/*.deb "$dir"/*.ddeb
