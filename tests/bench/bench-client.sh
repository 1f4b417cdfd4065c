#!/bin/sh
# ns added per intercepted call: bench_client with and without the library,
# alternating, RUNS times each; prints medians and the difference.
# usage: bench-client.sh BUILD_DIR [ITERATIONS] [RUNS]
set -eu
b=${1:?build dir}
n=${2:-2000000}
runs=${3:-5}
work=$(mktemp -d /dev/shm/iotrace-bench.XXXXXX)
trap 'kill -TERM $agent $collector 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$b/collector/iotrace-collector" --listen "tcp://127.0.0.1:$port" --store "$work/store" 2>"$work/c.log" &
collector=$!
"$b/agent/iotrace-agent" --collector "tcp://127.0.0.1:$port" --listen "ipc://$work/a.sock" 2>"$work/a.log" &
agent=$!
while [ ! -S "$work/a.sock" ]; do sleep 0.05; done
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
