#!/bin/sh
# iotrace-export --dump-slog2: a clean reference file dumps with exit status 0
# and a clean summary; a file that is not SLOG-2 fails with a clear message.
# Usage: slog2-dump-cli.sh IOTRACE_EXPORT REFERENCE_DIR
set -eu
export_bin=$1
ref=$2
out=$("$export_bin" --dump-slog2 "$ref/fpilog.slog2")
printf '%s\n' "$out" | grep -qx \
    'summary nodes=15 drawables=153 composites=0 primitives=153 shadows=113 violations=0'
if err=$("$export_bin" --dump-slog2 "$ref/FACTS.md" 2>&1 >/dev/null); then
    echo "FACTS.md was accepted as an SLOG-2 file" >&2
    exit 1
fi
printf '%s\n' "$err" | grep -q 'FACTS.md: header block: not an SLOG-2 file'
