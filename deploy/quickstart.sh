#!/bin/sh
# The main job on a local default: installs the Debian packages, builds,
# starts a collector and an agent on this machine and a 2-brick GlusterFS
# volume with the iotrace translators (deploy/gluster/volume.sh, no glusterd),
# runs an MPI-IO program on it under `mpiexec -n 4` with libiotrace-client
# preloaded, and prints what was recorded: the MPI-IO calls, the POSIX calls
# inside them and the disk operations on the bricks, joined by CallID; then
# the job's statistics, and writes them as JSON and the trace as an SLOG-2
# file for Jumpshot.
# While the job runs, the collector's live dashboard is at
# http://127.0.0.1:8080/; with --serve the collector keeps serving it after
# the demo until Ctrl-C.
# Environment: IOTRACE_DEMO_DIR (default /tmp/iotrace-demo), IOTRACE_DEMO_PORT
# (default 5555), IOTRACE_DEMO_HTTP (default 127.0.0.1:8080), IOTRACE_DEMO_RANKS
# (default 4), IOTRACE_DEMO_VOLUME (distribute, replica or disperse; default
# distribute).
set -eu
serve=0
case ${1:-} in
    --serve) serve=1 ;;
    "") ;;
    *) echo "usage: $0 [--serve]" >&2; exit 2 ;;
esac
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/deploy/install-deps.sh"
"$top/deploy/build.sh" "$top/build"
b="$top/build"
work=${IOTRACE_DEMO_DIR:-/tmp/iotrace-demo}
port=${IOTRACE_DEMO_PORT:-5555}
ranks=${IOTRACE_DEMO_RANKS:-4}
http=${IOTRACE_DEMO_HTTP:-127.0.0.1:8080}
volume=${IOTRACE_DEMO_VOLUME:-distribute}
registry=/iotrace-demo-registry
"$top/deploy/gluster/volume.sh" stop --dir "$work/vol" >/dev/null 2>&1 || true
rm -rf "$work"
mkdir -p "$work"

# Loopback is no boundary between the users of this machine: the agent
# authenticates with a key of its own, bound to its node (docs/transport.md,
# "Keys and nodes"), so that no other local user can pass for it.
node=$(hostname -s)
mkdir -m 0700 "$work/keys" "$work/keys/agents"
"$b/collector/iotrace-collector" --keygen "$work/keys/collector" >/dev/null
"$b/agent/iotrace-agent" --keygen "$work/keys/agent" >/dev/null
cp "$work/keys/agent.pub" "$work/keys/agents/$node.pub"
"$b/collector/iotrace-collector" --listen "tcp://127.0.0.1:$port" --store "$work/store" \
    --curve-key "$work/keys/collector" --curve-clients "$work/keys/agents" \
    --http "$http" --job-idle 3000 2>"$work/collector.log" &
collector=$!
"$b/agent/iotrace-agent" --collector "tcp://127.0.0.1:$port" --listen "ipc://$work/agent.sock" \
    --curve-key "$work/keys/agent" --collector-key "$work/keys/collector.pub" \
    --node "$node" 2>"$work/agent.log" &
agent=$!
stop() {
    "$top/deploy/gluster/volume.sh" stop --dir "$work/vol" >/dev/null 2>&1 || true
    kill -TERM "$agent" "$collector" 2>/dev/null || true
    wait "$agent" "$collector" 2>/dev/null || true
}
trap stop EXIT INT TERM
i=0
while [ ! -S "$work/agent.sock" ]; do
    i=$((i + 1))
    if [ $i -gt 100 ]; then
        echo "quickstart: the agent did not start; see $work/agent.log" >&2
        exit 1
    fi
    sleep 0.1
done

case $volume in
    disperse) bricks=3 ;;
    *) bricks=2 ;;
esac
echo "== a $volume GlusterFS volume with the iotrace translators on $work/mnt"
"$top/deploy/gluster/volume.sh" start --type "$volume" --bricks "$bricks" --dir "$work/vol" \
    --mount "$work/mnt" --xlator-dir "$b/serverhooks" --agent "ipc://$work/agent.sock" \
    --registry "$registry" --fresh

job="quickstart-$(date +%Y%m%d-%H%M%S)"
echo "== mpiexec -n $ranks mpiio_mix on the volume, libiotrace-client.so preloaded (job $job)"
echo "   live dashboard: http://$http/?job=$job"
# Created first: see "direct I/O" in docs/gluster.md.
: >"$work/mnt/data.bin"
mpiexec -n "$ranks" -genv LD_PRELOAD "$b/clientlib/libiotrace-client.so" \
    -genv IOTRACE_AGENT "ipc://$work/agent.sock" -genv IOTRACE_REGISTRY "$registry" \
    -genv IOTRACE_JOB_ID "$job" "$b/tests/mpiio_mix" "$work/mnt/data.bin" 65536
"$top/deploy/gluster/volume.sh" stop --dir "$work/vol"
# SIGTERM makes the agent deliver what it holds before it exits.
kill -TERM "$agent"
wait "$agent" || true
echo "== the collector's live view of the job (http://$http/api/v1/jobs)"
i=0
until curl -sf "http://$http/api/v1/jobs" | python3 -c '
import json, sys
job = [j for j in json.load(sys.stdin)["jobs"] if j["job"] == sys.argv[1]]
if not job or job[0]["state"] != "finished":
    sys.exit(1)
print("  %(job)s: %(state)s, %(ranks)d ranks, %(mpiio_calls)d MPI-IO calls, "
      "%(bytes_written)d bytes written, %(bytes_read)d read, %(disk_ops)d disk operations, "
      "%(dropped_events)d dropped" % job[0])
' "$job"; do
    i=$((i + 1))
    if [ $i -gt 150 ]; then
        echo "quickstart: the collector did not finish the job; see $work/collector.log" >&2
        break
    fi
    sleep 0.2
done

echo "== iotrace-export --list-jobs"
"$b/collector/iotrace-export" --store "$work/store" --list-jobs
"$b/collector/iotrace-export" --store "$work/store" --job "$job" --jsonl "$work/trace.jsonl"
echo "== what was recorded ($work/trace.jsonl)"
python3 - "$work/trace.jsonl" <<'PY'
import collections, json, sys
events = [json.loads(l) for l in open(sys.argv[1])]
by = collections.Counter((e["kind"], e["func"]) for e in events if e["kind"] != "drop")
calls = {e["callid"] for e in events if e["kind"] == "mpiio"}
inner = [e for e in events if e["kind"] == "posix" and e["callid"] in calls]
disk = [e for e in events if e["kind"] == "disk"]
tagged = [e for e in disk if e["callid"] in calls]
print(f"{len(events)} events, {len(calls)} MPI-IO CallIDs, "
      f"{len(inner)} POSIX calls made inside MPI-IO calls carry their CallID, "
      f"{len(tagged)} of {len(disk)} disk operations on "
      f"{len({e['server'] for e in disk})} bricks carry the CallID of the call that caused them")
for (kind, func), n in sorted(by.items()):
    nbytes = sum(e["bytes"] or 0 for e in events if e["kind"] == kind and e["func"] == func)
    print(f"  {kind:6} {func:32} {n:5} calls {nbytes:12} bytes")
dropped = sum(e["dropped"] for e in events if e["kind"] == "drop")
print(f"dropped events: {dropped}")
print("an MPI-IO call and the disk operations it caused:")
call = next((e for e in events if e["kind"] == "mpiio" and e["func"] == "MPI_File_write_at"), None)
if call:
    print("  " + json.dumps(call))
    for e in tagged:
        if e["callid"] == call["callid"]:
            print("    -> " + json.dumps(e))
PY
echo "== iotrace-export --stats"
"$b/collector/iotrace-export" --store "$work/store" --job "$job" --stats
"$b/collector/iotrace-export" --store "$work/store" --job "$job" --stats --format json \
    >"$work/stats.json"
echo "== iotrace-export --slog2 $work/trace.slog2 (open it with: jumpshot $work/trace.slog2)"
"$b/collector/iotrace-export" --store "$work/store" --job "$job" --slog2 "$work/trace.slog2"
echo "== iotrace-export --chrome $work/trace.json (open it in https://ui.perfetto.dev) and --csv $work/trace.csv"
"$b/collector/iotrace-export" --store "$work/store" --job "$job" --chrome "$work/trace.json"
"$b/collector/iotrace-export" --store "$work/store" --job "$job" --csv "$work/trace.csv"
if [ $serve -eq 1 ]; then
    echo "== the collector keeps serving http://$http/?job=$job (Ctrl-C stops it)"
    wait "$collector" || true
else
    kill -TERM "$collector"
    wait "$collector" || true
fi
trap - EXIT INT TERM
