#!/bin/sh
# run-fuzzer.sh FUZZER SECONDS SEED_DIR...: runs a libFuzzer target for
# SECONDS from the seeds, new inputs going to a scratch corpus (the seeds
# are never written).  Exit status: the fuzzer's (0 unless it found a
# crash, a sanitizer report, a leak or a timeout; the input is then saved
# in the scratch directory, whose name is printed).
set -eu
fuzzer=$1 seconds=$2
shift 2
work=$(mktemp -d /tmp/iotrace-fuzz.XXXXXX)
status=0
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/" "$work" "$@" || status=$?
if [ $status -eq 0 ]; then
    rm -rf "$work"
else
    echo "run-fuzzer: failed with status $status; the input is in $work" >&2
fi
exit $status
