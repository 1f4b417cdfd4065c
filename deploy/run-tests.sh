#!/bin/sh
# The whole iotrace test suite: installs what it needs, builds twice (plain,
# and with AddressSanitizer + UBSan) and runs every CTest test in both; then
# builds the libFuzzer targets with clang and runs each for
# IOTRACE_FUZZ_SECONDS (default 10).
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
echo "== fuzz build (clang, libFuzzer) =="
dir="$top/build-test-fuzz"
CC=clang cmake -S "$top" -B "$dir" -DIOTRACE_FUZZ=ON -DIOTRACE_WERROR=ON \
    -DIOTRACE_FUZZ_SECONDS="${IOTRACE_FUZZ_SECONDS:-10}" >/dev/null
cmake --build "$dir" -j "$(nproc 2>/dev/null || echo 2)" \
    --target fuzz_wire fuzz_store fuzz_slog2 fuzz_config fuzz_http
echo "== fuzz tests =="
(cd "$dir" && ctest -L fuzz --output-on-failure) || status=1
exit $status
