#!/bin/sh
# Line, branch and function coverage of the test suite: builds iotrace with
# gcc --coverage into BUILD_DIR (default: build-coverage), runs every CTest
# test there (extra arguments go to ctest, e.g. -L unit or -E gluster), and
# prints coverage per folder of the source tree from gcovr.  The report per
# file, line by line, is in BUILD_DIR/coverage/index.html; the figures per
# folder also in BUILD_DIR/coverage/summary.json.  docs/testing.md has the
# latest figures.  Exit status: ctest's (the report is printed either way).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$top/build-coverage}
[ $# -gt 0 ] && shift
command -v gcovr >/dev/null || { echo "coverage: gcovr not found (deploy/install-deps.sh installs it)" >&2; exit 2; }
"$top/deploy/build.sh" "$dir" -DIOTRACE_COVERAGE=ON -DCMAKE_BUILD_TYPE=Debug
# Counts from an earlier run would be added to this one's.
find "$dir" -name '*.gcda' -delete
# Tests run some programs as other users (nobody); each process adds its
# counts to the .gcda files at exit, so it must be able to create and write
# them.  Sticky directories let it create files without letting it replace
# anyone else's (the binaries); the umask leaves the counts, and the tests'
# own files, writable by everyone: run this on a machine of your own.
umask 000
find "$dir" -type d -exec chmod 1777 {} +
status=0
(cd "$dir" && ctest --output-on-failure --timeout 600 "$@") || status=$?
mkdir -p "$dir/coverage"
# Only the project's own sources: not the tests, not code generated into the
# build tree (protobuf-c's message tables, the wrapper tables), nor
# serverhooks' copies of GlusterFS headers.
gcovr --root "$top" --object-directory "$dir" --gcov-ignore-parse-errors \
    --exclude "$top/tests/" --exclude "$dir/" --exclude-unreachable-branches \
    --json "$dir/coverage/coverage.json" --html-details "$dir/coverage/index.html" \
    --print-summary >"$dir/coverage/gcovr.log" 2>&1 || { cat "$dir/coverage/gcovr.log" >&2; exit 2; }
python3 - "$dir/coverage/coverage.json" "$dir/coverage/summary.json" <<'PY'
import json, sys
from collections import defaultdict

# Per folder (two levels: collector/daemon, clientlib): lines, branches and
# functions run at least once, out of those gcov counts.
data = json.load(open(sys.argv[1]))
tot = defaultdict(lambda: [0, 0, 0, 0, 0, 0])
for f in data["files"]:
    parts = f["file"].split("/")
    folder = "/".join(parts[:2]) if len(parts) > 2 and parts[0] == "collector" else parts[0]
    t = tot[folder]
    for ln in f["lines"]:
        if ln.get("gcovr/noncode"):
            continue
        t[0] += 1
        t[1] += ln["count"] > 0
        for b in ln.get("branches", []):
            t[2] += 1
            t[3] += b["count"] > 0
    for fn in f.get("functions", []):
        t[4] += 1
        t[5] += fn["execution_count"] > 0
def pct(a, b):
    return f"{100.0 * a / b:5.1f} %" if b else "    –  "
rows = sorted(tot.items())
whole = [sum(t[i] for _, t in rows) for i in range(6)]
print(f"{'folder':22} {'lines':>18} {'branches':>18} {'functions':>15}")
summary = {}
for name, t in rows + [("all", whole)]:
    print(f"{name:22} {pct(t[1], t[0])} of {t[0]:6} {pct(t[3], t[2])} of {t[2]:6} "
          f"{pct(t[5], t[4])} of {t[4]:4}")
    summary[name] = {"lines": t[0], "lines_run": t[1], "branches": t[2], "branches_taken": t[3],
                     "functions": t[4], "functions_run": t[5]}
json.dump(summary, open(sys.argv[2], "w"), indent=1)
PY
echo "coverage: line by line in $dir/coverage/index.html"
exit $status
