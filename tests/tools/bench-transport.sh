#!/bin/bash
# End-to-end transport benchmark: synthetic producers -> iotrace-agent (ipc)
# -> collector (tcp loopback).  A run starts when the producers start and
# ends when the agent, told to stop once they are done, has every batch
# acknowledged (stored, for the real collector) and exits.  Prints events/s
# of every run and the median.
#
#   bench-transport.sh --agent BIN --producer BIN --collector BIN
#                      [--events N] [--events-per-batch E] [--producers P] [--runs R]
#
# --collector may be iotrace-collector (given --store DIR) or the agent
# tests' test-agent-collector (given --record FILE).
set -u
EVENTS=2000000 PER_BATCH=4096 PRODUCERS=1 RUNS=5
AGENT= PRODUCER= COLLECTOR=
while [ $# -gt 0 ]; do
    case $1 in
    --agent) AGENT=$2 ;;
    --producer) PRODUCER=$2 ;;
    --collector) COLLECTOR=$2 ;;
    --events) EVENTS=$2 ;;
    --events-per-batch) PER_BATCH=$2 ;;
    --producers) PRODUCERS=$2 ;;
    --runs) RUNS=$2 ;;
    *) echo "bench-transport: unknown argument $1" >&2; exit 2 ;;
    esac
    shift 2
done
for bin in "$AGENT" "$PRODUCER" "$COLLECTOR"; do
    [ -x "$bin" ] || { echo "bench-transport: $bin is not executable" >&2; exit 2; }
done

BATCHES=$(( (EVENTS + PER_BATCH * PRODUCERS - 1) / (PER_BATCH * PRODUCERS) ))
TOTAL=$((BATCHES * PER_BATCH * PRODUCERS))

T=$(mktemp -d /tmp/iotrace-bench.XXXXXX)
APID= CPID=
cleanup() {
    [ -n "$APID" ] && kill -KILL "$APID" 2>/dev/null
    [ -n "$CPID" ] && kill -KILL "$CPID" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_collector() {
    local dir=$1 port=$2
    if [ "$(basename "$COLLECTOR")" = iotrace-collector ]; then
        "$COLLECTOR" --listen "tcp://127.0.0.1:$port" --store "$dir/store" --http off >"$dir/collector.log" 2>&1 &
    else
        "$COLLECTOR" --listen "tcp://127.0.0.1:$port" --record "$dir/record" >"$dir/collector.log" 2>&1 &
    fi
    CPID=$!
}

# One run; prints events/s.
run_once() {
    local dir=$T/run$1 port
    mkdir -p "$dir"
    port=$(free_port)
    start_collector "$dir" "$port"
    "$AGENT" --collector "tcp://127.0.0.1:$port" --listen "ipc://$dir/agent.sock" \
        --node bench --drain-timeout 120s --stats-interval 1h >"$dir/agent.log" 2>&1 &
    APID=$!
    until grep -q "collector welcomed us" "$dir/agent.log"; do
        kill -0 $APID 2>/dev/null || { cat "$dir/agent.log" >&2; return 1; }
        sleep 0.02
    done
    local t0 pids="" rank
    t0=$(date +%s.%N)
    for rank in $(seq 0 $((PRODUCERS - 1))); do
        "$PRODUCER" --agent "ipc://$dir/agent.sock" --node bench --job bench --rank "$rank" \
            --batches "$BATCHES" --events-per-batch "$PER_BATCH" >"$dir/producer$rank.out" &
        pids="$pids $!"
    done
    # shellcheck disable=SC2086
    wait $pids
    kill -TERM $APID
    wait $APID
    local t1
    t1=$(date +%s.%N)
    APID=
    kill -TERM $CPID
    wait $CPID 2>/dev/null
    CPID=
    grep -q "pending=0 " "$dir/agent.log" || { echo "run $1: batches left unacknowledged" >&2; return 1; }
    echo "$TOTAL / ($t1 - $t0)" | bc
}

echo "bench-transport: $TOTAL events in $((BATCHES * PRODUCERS)) batches of $PER_BATCH, $PRODUCERS producer(s), collector $(basename "$COLLECTOR")"
results=()
for i in $(seq 1 "$RUNS"); do
    r=$(run_once "$i") || exit 1
    echo "  run $i: $r events/s"
    results+=("$r")
done
median=$(printf '%s\n' "${results[@]}" | sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : int((v[NR/2]+v[NR/2+1])/2)}')
echo "median: $median events/s"
