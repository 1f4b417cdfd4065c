#!/bin/sh
# What the GlusterFS translators cost and what they show (docs/performance.md,
# "GlusterFS translators"). Not a pass/fail test; needs root and /dev/fuse.
#
# 1. Latency added per operation: bench_fuse_ops times OPS 4 KiB O_DIRECT
#    pwrite()s and then OPS pread()s through the FUSE mounts of four 1-brick
#    distribute volumes, one per configuration:
#      none    no translators (--no-client-hook --no-server-hook)
#      server  iotrace-server only, recording every operation to the agent
#      tagged  both; the thread is in a published registry entry, so
#              iotrace-client tags every request with job and CallID
#      miss    both; no registry entry for the thread (lookup miss)
#    The four take turns operation by operation within one process, so load
#    that drifts on a shared machine slows them alike. RUNS rounds, each with
#    the volumes started afresh. Prints the median over the rounds of each
#    configuration's mean and median ns/op, the median of the differences to
#    "none" within a round, and the CPU time per operation of the FUSE client
#    and brick processes (and of the agent and collector).
# 2. Disk operations per MPI-IO call: bench_mpiio_sizes under
#    `mpiexec -n 4` with libiotrace-client preloaded, on a 2-brick
#    distribute, a replica-2 and a disperse 2+1 volume with both translators;
#    from `iotrace-export --jsonl`, the disk operations of each call (joined
#    on job and CallID) per function, transfer size and volume type: mean and
#    max per call, and disk bytes / call bytes.
#
# usage: bench-gluster.sh BUILD_DIR [OPS] [RUNS] [CALLS] [SIZES]
#   OPS   operations of each kind per configuration in part 1 (default 10000)
#   RUNS  rounds in part 1 (default 5)
#   CALLS calls of each kind per size and rank in part 2 (default 24)
#   SIZES transfer sizes in part 2, bytes; "a" after a size: a page-aligned
#         buffer instead of malloc()'s (default
#         "4096 65536 1048576 4194304 1048576a 4000")
# Environment: IOTRACE_BENCH_DIR (where bricks, store and logs go; default
# /dev/shm), IOTRACE_BENCH_BASE_PORT (first brick port, default 49700),
# IOTRACE_BENCH_PART (1 or 2: only that part), IOTRACE_KEEP_BENCH_DIR (keep
# the directory: trace.jsonl, logs).
set -eu
b=$(cd "${1:?usage: bench-gluster.sh BUILD_DIR [OPS] [RUNS] [CALLS] [SIZES]}" && pwd -P)
ops=${2:-10000}
runs=${3:-5}
calls=${4:-24}
sizes=${5:-4096 65536 1048576 4194304 1048576a 4000}
part=${IOTRACE_BENCH_PART:-all}
base_port=${IOTRACE_BENCH_BASE_PORT:-49700}
src=$(cd "$(dirname "$0")/../.." && pwd -P)
volume_sh=$src/deploy/gluster/volume.sh

die() {
    echo "bench-gluster: $*" >&2
    exit 1
}
[ "$(id -u)" -eq 0 ] || die "must run as root (GlusterFS bricks and a FUSE mount)"
for f in collector/iotrace-collector collector/iotrace-export agent/iotrace-agent \
    clientlib/libiotrace-client.so serverhooks/iotrace-client.so serverhooks/iotrace-server.so \
    tests/bench_fuse_ops tests/bench_mpiio_sizes; do
    [ -x "$b/$f" ] || [ -f "$b/$f" ] || die "$b/$f missing (cmake --build $b)"
done

work=$(mktemp -d "${IOTRACE_BENCH_DIR:-/dev/shm}/iotrace-bench-gluster.XXXXXX")
registry=/iotrace-bench-gluster-$$
agent="" collector=""
cleanup() {
    set +e
    for v in "$work"/vol-*; do
        [ -d "$v" ] && "$volume_sh" stop --dir "$v" >/dev/null 2>&1
    done
    # SIGTERM: the agent delivers what it holds, then both exit.
    [ -n "$agent" ] && kill -TERM "$agent" 2>/dev/null && wait "$agent"
    [ -n "$collector" ] && kill -TERM "$collector" 2>/dev/null && wait "$collector"
    rm -f "/dev/shm${registry}-$(id -u)"
    if [ -n "${IOTRACE_KEEP_BENCH_DIR:-}" ]; then
        echo "bench-gluster: kept $work" >&2
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$b/collector/iotrace-collector" --listen "tcp://127.0.0.1:$port" --store "$work/store" --http off 2>"$work/collector.log" &
collector=$!
"$b/agent/iotrace-agent" --collector "tcp://127.0.0.1:$port" --listen "ipc://$work/agent.sock" \
    --node "$(hostname -s)" 2>"$work/agent.log" &
agent=$!
i=0
while [ ! -S "$work/agent.sock" ]; do
    i=$((i + 1))
    [ $i -le 200 ] || die "the agent did not start: $(cat "$work/agent.log")"
    sleep 0.05
done

# start_volume NAME TYPE BRICKS [volume.sh options]: mounts on
# $work/mnt-NAME, bricks from port base_port + 10 * (NAME's place below).
start_volume() {
    name=$1 type=$2 bricks=$3
    shift 3
    slot=0
    for v in none server tagged miss distribute replica disperse; do
        [ "$v" = "$name" ] && break
        slot=$((slot + 1))
    done
    "$volume_sh" start --type "$type" --bricks "$bricks" --dir "$work/vol-$name" \
        --mount "$work/mnt-$name" --name "gb$name" --xlator-dir "$b/serverhooks" \
        --agent "ipc://$work/agent.sock" --registry "$registry" \
        --base-port $((base_port + 10 * slot)) --fresh "$@" >/dev/null ||
        die "volume $name did not start"
}
stop_volume() {
    "$volume_sh" stop --dir "$work/vol-$1" >/dev/null
}

# settle JOB MIN_MPIIO: waits until the store holds at least MIN_MPIIO MPI-IO
# events of JOB and its event count stopped changing (the bricks' events
# arrive a little later than the ranks').
settle() {
    python3 - "$b/collector/iotrace-export" "$work/store" "$1" "$2" <<'PY'
import json, subprocess, sys, time
export, store, job, want = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
last, stable, deadline = -1, 0, time.time() + 120
while time.time() < deadline:
    out = subprocess.run([export, "--store", store, "--job", job, "--jsonl", "-"],
                         capture_output=True, text=True).stdout
    lines = out.splitlines()
    mpiio = sum('"kind":"mpiio"' in l for l in lines)
    stable = stable + 1 if mpiio >= want and len(lines) == last else 0
    if stable >= 3:
        sys.exit(0)
    last = len(lines)
    time.sleep(0.5)
sys.exit(f"bench-gluster: events of {job} did not settle ({last} events)")
PY
}

# ------------------------------------------------------------------ part 1
if [ "$part" = all ] || [ "$part" = 1 ]; then
    "$b/tests/bench_fuse_ops" -r "$registry" "$work/unused" 0 # create the registry
    latjob=bench-gluster-lat-$$
    configs="none server tagged miss"
    # cpu_ns PID...: CPU time of all their threads so far (ns, schedstat).
    cpu_ns() {
        for p in "$@"; do cat "/proc/$p/task/"*/schedstat 2>/dev/null; done |
            awk '{ s += $1 } END { printf "%.0f\n", s }'
    }
    echo "== part 1: $ops 4 KiB O_DIRECT pwrite + pread through FUSE, 1-brick distribute, $runs rounds"
    r=0
    while [ $r -lt "$runs" ]; do
        start_volume none distribute 1 --no-client-hook --no-server-hook
        start_volume server distribute 1 --no-client-hook
        start_volume tagged distribute 1
        start_volume miss distribute 1
        sleep 1 # let the agent and collector finish with the previous round
        before=""
        for c in $configs; do
            before="$before $(cpu_ns "$(cat "$work/vol-$c/run/client.pid")") $(cpu_ns "$(cat "$work/vol-$c/run/brick0.pid")")"
        done
        t0=$(cpu_ns "$agent" "$collector")
        "$b/tests/bench_fuse_ops" -r "$registry" -j "$latjob" "$ops" none:plain:"$work/mnt-none/lat.dat" \
            server:plain:"$work/mnt-server/lat.dat" tagged:tag:"$work/mnt-tagged/lat.dat" \
            miss:miss:"$work/mnt-miss/lat.dat"
        t1=$(cpu_ns "$agent" "$collector")
        # CPU per operation (pwrite and pread together, warm-up included).
        n=$((2 * (ops + 100)))
        # shellcheck disable=SC2086 # the numbers, split on purpose
        set -- $before
        for c in $configs; do
            echo "$c client_cpu_ns $((($(cpu_ns "$(cat "$work/vol-$c/run/client.pid")") - $1) / n))"
            echo "$c brick_cpu_ns $((($(cpu_ns "$(cat "$work/vol-$c/run/brick0.pid")") - $2) / n))"
            shift 2
        done
        # The agent and collector serve server, tagged and miss together.
        echo "all trace_cpu_ns $(((t1 - t0) / (3 * n)))"
        for v in $configs; do stop_volume "$v"; done
        r=$((r + 1))
    done >"$work/latency.txt"
    # What reached the collector: every operation of server/tagged/miss is a
    # disk event; only tagged's carry the CallID.
    settle "$latjob" 0
    "$b/collector/iotrace-export" --store "$work/store" --jsonl "$work/latency.jsonl"
    python3 - "$work/latency.txt" "$work/latency.jsonl" "$ops" "$runs" "$latjob" <<'PY'
import collections, json, statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
ops, runs, job = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
vals = collections.defaultdict(list)
for cfg, key, v in rows:
    vals[cfg, key].append(float(v))
med = lambda cfg, key: statistics.median(vals[cfg, key])
names = {"none": "(a) no translators", "server": "(b) iotrace-server only",
         "tagged": "(c) both, registry entry (tagged)", "miss": "(d) both, no entry (lookup miss)"}
# Added: the median over the rounds of (configuration - none) within each
# round, which cancels the load drifting from one round to the next.
added = lambda cfg, key: statistics.median(x - y for x, y in zip(vals[cfg, key], vals["none", key]))
print(f"bench-gluster latency: {ops} ops per configuration, {runs} rounds; ns/op, median over the rounds of "
      "each round's mean and of each round's per-op median (p50); added: median of the "
      "differences to (a) within a round")
print(f"  {'configuration':36} {'pwrite':>7} {'added':>6} {'p50':>7} {'added':>6}"
      f"   {'pread':>7} {'added':>6} {'p50':>7} {'added':>6}")
for cfg in ("none", "server", "tagged", "miss"):
    cells = []
    for op in ("pwrite", "pread"):
        for key in (op + "_ns", op + "_p50_ns"):
            cells.append(f"{med(cfg, key):7.0f}")
            cells.append(f"{added(cfg, key):+6.0f}" if cfg != "none" else f"{'':6}")
    print(f"  {names[cfg]:36} {' '.join(cells[:4])}   {' '.join(cells[4:])}")
print("  CPU time per operation (pwrite and pread together; ns, median over the rounds;"
      " added: as above):")
print(f"  {'configuration':36} {'FUSE client':>11} {'added':>6} {'brick':>7} {'added':>6}")
for cfg in ("none", "server", "tagged", "miss"):
    cells = []
    for key, w in (("client_cpu_ns", 11), ("brick_cpu_ns", 7)):
        cells.append(f"{med(cfg, key):{w}.0f}")
        cells.append(f"{added(cfg, key):+6.0f}" if cfg != "none" else f"{'':6}")
    print(f"  {names[cfg]:36} {' '.join(cells)}")
print(f"  agent + collector: {med('all', 'trace_cpu_ns'):.0f} ns CPU per recorded operation")
for cfg in ("none", "server", "tagged", "miss"):
    print(f"  rounds {cfg:7} pwrite " + " ".join(f"{v:.0f}" for v in vals[cfg, "pwrite_ns"])
          + " | pread " + " ".join(f"{v:.0f}" for v in vals[cfg, "pread_ns"]))
ev = [json.loads(l) for l in open(sys.argv[2])]
for name in ("none", "server", "tagged", "miss"):
    d = [e for e in ev if e["kind"] == "disk" and e["file"] == "/lat.dat"
         and e["server"].split("/")[-3] == f"vol-{name}" and e["func"] in ("writev", "readv")]
    tagged = sum(e["callid"] is not None and e["job"] == job for e in d)
    print(f"  recorded on the brick for {name:7}: {len(d)} writev/readv, {tagged} with a CallID")
drops = sum(e["dropped"] for e in ev if e["kind"] == "drop")
print(f"  dropped events: {drops}")
PY
fi

# ------------------------------------------------------------------ part 2
if [ "$part" = all ] || [ "$part" = 2 ]; then
    nsizes=$(echo "$sizes" | wc -w)
    echo "== part 2: bench_mpiio_sizes, 4 ranks, $calls calls per kind, sizes $sizes"
    for t in distribute:2 replica:2 disperse:3; do
        type=${t%%:*}
        start_volume "$type" "$type" "${t#*:}"
        job=bench-gluster-$type-$$
        # shellcheck disable=SC2086 # the sizes are separate arguments
        mpiexec -n 4 -genv LD_PRELOAD "$b/clientlib/libiotrace-client.so" \
            -genv IOTRACE_AGENT "ipc://$work/agent.sock" -genv IOTRACE_REGISTRY "$registry" \
            -genv IOTRACE_JOB_ID "$job" "$b/tests/bench_mpiio_sizes" "$work/mnt-$type" "$calls" \
            $sizes >/dev/null || die "bench_mpiio_sizes failed on $type"
        settle "$job" $((4 * 4 * calls * nsizes))
        stop_volume "$type"
    done
    "$b/collector/iotrace-export" --store "$work/store" --jsonl "$work/trace.jsonl"
    python3 - "$work/trace.jsonl" "$$" "$sizes" "$calls" <<'PY'
import collections, json, re, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
pid, sizes, calls = sys.argv[2], sys.argv[3].split(), int(sys.argv[4])
types = ("distribute", "replica", "disperse")
kinds = (("MPI_File_write_at", ""), ("MPI_File_read_at", ""),
         ("MPI_File_write_at_all", ""), ("MPI_File_write_at_all", "-cb"))
label = lambda f, cb: f + (" (cb)" if cb else "")
disk = collections.defaultdict(list)      # (job, callid) -> disk events
untagged = collections.Counter()
for e in ev:
    if e["kind"] != "disk":
        continue
    if e["callid"] is None:
        if re.fullmatch(r"/s\d+a?(-cb)?\.dat", e["file"] or "") and e["func"] in ("readv", "writev"):
            untagged[e["server"].split("/")[-3]] += 1
        continue
    disk[e["job"], e["callid"]].append(e)
stats = {}
for t in types:
    job = f"bench-gluster-{t}-{pid}"
    for e in ev:
        if e["kind"] != "mpiio" or e["job"] != job:
            continue
        m = re.search(r"/s(\d+a?)(-cb)?\.dat$", e["file"] or "")
        if not m or (e["func"], m.group(2) or "") not in kinds:
            continue
        key = (t, e["func"], m.group(2) or "", m.group(1))
        s = stats.setdefault(key, {"calls": 0, "ops": [], "w": 0, "r": 0, "other": 0,
                                   "cbytes": 0, "dbytes": 0, "bricks": []})
        d = disk.get((e["job"], e["callid"]), [])
        s["calls"] += 1
        s["ops"].append(len(d))
        s["cbytes"] += e["bytes"]
        for x in d:
            f = x["func"]
            s["w" if f == "writev" else "r" if f == "readv" else "other"] += 1
            if f in ("writev", "readv"):
                s["dbytes"] += x["bytes"]
        s["bricks"].append(len({x["server"] for x in d}))
print(f"bench-gluster disk operations per MPI-IO call: 4 ranks, {calls} calls of each kind "
      "per rank and size; per call: mean (max) disk operations, of which writev+readv+other "
      "on average, bricks touched (max), and disk bytes / call bytes")
for t in types:
    print(f"  {t}:")
    print(f"    {'function':27} {'size':>9} {'calls':>5} {'ops/call':>13} {'writev+readv+other':>20}"
          f" {'bricks':>6} {'disk/call bytes':>15}")
    for f, cb in kinds:
        for size in sizes:
            s = stats.get((t, f, cb, size))
            if not s:
                print(f"    {label(f, cb):27} {size:>9} {'-':>5}")
                continue
            n = s["calls"]
            mix = f"{s['w'] / n:.2f}+{s['r'] / n:.2f}+{s['other'] / n:.2f}"
            amp = s["dbytes"] / s["cbytes"] if s["cbytes"] else 0
            ops = f"{sum(s['ops']) / n:.2f} ({max(s['ops'])})"
            print(f"    {label(f, cb):27} {size:>9} {n:5} {ops:>13} {mix:>20} {max(s['bricks']):6}"
                  f" {amp:15.3f}")
print("  untagged writev/readv of the benchmark files:",
      dict(untagged) if untagged else "none")
drops = sum(e["dropped"] for e in ev if e["kind"] == "drop")
print(f"  dropped events: {drops}")
PY
fi
