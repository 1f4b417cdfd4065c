#!/bin/sh
# The whole iotrace test suite: installs what it needs, builds twice (plain,
# and with AddressSanitizer + UBSan) and runs every CTest test in both.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/deploy/install-deps.sh"
status=0
for variant in plain asan; do
    dir="$top/build-test-$variant"
    extra=""
    [ "$variant" = asan ] && extra="-DIOTRACE_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug"
    echo "== $variant build =="
    # shellcheck disable=SC2086
    "$top/deploy/build.sh" "$dir" $extra
    echo "== $variant tests =="
    (cd "$dir" && ctest --output-on-failure --timeout 600) || status=1
done
exit $status
