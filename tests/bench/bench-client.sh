#!/bin/sh
# ns added per intercepted call: bench_client with and without the library,
# alternating, RUNS times each; prints medians and the difference.
# usage: bench-client.sh BUILD_DIR [ITERATIONS] [RUNS]
#
# Instructions added per call instead, counted by valgrind (callgrind) on
# the main thread, which unlike the time does not depend on what else the
# machine is doing.  LIBRARY (default: BUILD_DIR's) lets another build's
# library be counted with this bench_client.
# usage: bench-client.sh --instructions BUILD_DIR [LIBRARY]
#
# The distribution of single MPI_File_write_at times instead (each call timed
# on its own): untraced, traced with MPI-IO calls sending their batches
# (IOTRACE_INLINE_SEND=1, the default) and with the sender thread alone (0),
# alternating, RUNS times each; medians of each percentile.
# usage: bench-client.sh --latency BUILD_DIR [ITERATIONS] [RUNS]
set -eu
latency=0
if [ "${1:-}" = --latency ]; then
    latency=1
    shift
fi
if [ "${1:-}" = --instructions ]; then
    b=${2:?build dir}
    lib=${3:-$b/clientlib/libiotrace-client.so}
    work=$(mktemp -d /dev/shm/iotrace-bench.XXXXXX)
    trap 'rm -rf "$work"' EXIT
    # Two loop lengths, so that start-up and exit cancel out; each loop also
    # makes ITERATIONS/10 warm-up calls.  The ring holds every record, so
    # that none is dropped (a drop costs fewer instructions) however late
    # the sender thread runs under valgrind.
    for loop in mpi posix; do
        for n in 50000 100000; do
            for mode in without with; do
                rm -f "$work/f"
                pre=
                [ $mode = with ] && pre=$lib
                LD_PRELOAD=$pre IOTRACE_AGENT="ipc://$work/none.sock" IOTRACE_BUFFER_EVENTS=262144 \
                    valgrind --tool=callgrind --separate-threads=yes \
                    --callgrind-out-file="$work/cg.$loop.$n.$mode" \
                    "$b/tests/bench_client" "$work/f" $n $loop >/dev/null 2>&1
                printf '%s %s %s %s\n' $loop $n $mode \
                    "$(sed -n 's/^\(summary\|totals\): *//p' "$work/cg.$loop.$n.$mode-01" | head -1)"
            done
        done
    done >"$work/counts"
    python3 - "$work/counts" <<'PY'
import sys
c = {(l, int(n), m): int(v) for l, n, m, v in (line.split() for line in open(sys.argv[1]))}
print("bench-client: instructions per call on the calling thread (callgrind)")
for loop, name in (("mpi", "MPI_File_write_at (with its inner pwrite)"), ("posix", "pwrite")):
    per = {m: (c[loop, 100000, m] - c[loop, 50000, m]) / (1.1 * 50000) for m in ("without", "with")}
    print(f"  {name:42} without {per['without']:7.1f}  with {per['with']:7.1f}  added {per['with'] - per['without']:6.1f}")
PY
    exit 0
fi
b=${1:?build dir}
n=${2:-2000000}
runs=${3:-5}
work=$(mktemp -d /dev/shm/iotrace-bench.XXXXXX)
trap 'kill -TERM $agent $collector 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$b/collector/iotrace-collector" --listen "tcp://127.0.0.1:$port" --store "$work/store" --http off 2>"$work/c.log" &
collector=$!
"$b/agent/iotrace-agent" --collector "tcp://127.0.0.1:$port" --listen "ipc://$work/a.sock" 2>"$work/a.log" &
agent=$!
while [ ! -S "$work/a.sock" ]; do sleep 0.05; done
if [ $latency = 1 ]; then
    for i in $(seq "$runs"); do
        rm -f "$work/f"
        mpiexec -n 1 "$b/tests/bench_client" "$work/f" "$n" latency | sed 's/^/untraced /'
        for inline in 1 0; do
            rm -f "$work/f"
            mpiexec -n 1 -genv LD_PRELOAD "$b/clientlib/libiotrace-client.so" \
                -genv IOTRACE_AGENT "ipc://$work/a.sock" -genv IOTRACE_INLINE_SEND $inline \
                "$b/tests/bench_client" "$work/f" "$n" latency | sed "s/^/inline=$inline /"
        done
    done >"$work/results"
    python3 - "$work/results" "$n" "$runs" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.split()[1].startswith("latency_")]
keys = ["p50", "p99", "p99_9", "p99_99", "max"]
print(f"bench-client --latency: {sys.argv[2]} MPI_File_write_at (8 B, /dev/shm) per run, each timed, "
      f"median of {sys.argv[3]} runs per percentile, ns (load {sys.argv[4]} at the end)")
print("  " + " ".join(f"{k:>9}" for k in ["run"] + keys))
for mode in ("untraced", "inline=1", "inline=0"):
    vals = [statistics.median(float(v) for m, k, v in rows if m == mode and k == f"latency_{key}_ns")
            for key in keys]
    print("  " + f"{mode:>9} " + " ".join(f"{v:9.0f}" for v in vals))
PY
    exit 0
fi
for i in $(seq "$runs"); do
    rm -f "$work/f"
    mpiexec -n 1 "$b/tests/bench_client" "$work/f" "$n" | sed 's/^/base /'
    rm -f "$work/f"
    mpiexec -n 1 -genv LD_PRELOAD "$b/clientlib/libiotrace-client.so" \
        -genv IOTRACE_AGENT "ipc://$work/a.sock" "$b/tests/bench_client" "$work/f" "$n" | sed 's/^/traced /'
done >"$work/results"
python3 - "$work/results" "$n" "$runs" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = lambda mode, key: statistics.median(float(v) for m, k, v in rows if m == mode and k == key)
print(f"bench-client: {sys.argv[2]} calls per loop, median of {sys.argv[3]} runs")
for key, name in (("MPI_File_write_at_ns", "MPI_File_write_at (8 B, /dev/shm)"), ("pwrite_ns", "pwrite (8 B, /dev/shm)")):
    base, traced = med("base", key), med("traced", key)
    print(f"  {name:36} without {base:7.1f} ns  with {traced:7.1f} ns  added {traced - base:6.1f} ns")
PY
