#!/usr/bin/env python3
"""Clock alignment and matching across two nodes whose clocks really differ.

One machine plays two nodes, told apart by node name. The storage node --
its agent and the glusterfsd bricks of a 2-brick distribute volume with the
iotrace translators -- runs on the machine's clock, as does the collector.
The compute node -- its agent and the MPI ranks with libiotrace-client --
runs under one libfaketime wrapper, 3 s ahead and running 1 % fast. The
FUSE client stamps no times; it stays on the machine's clock.

The ranks run known_io (whole blocks, one file-system request each) and
mpiio_mix (independent, collective, split collective, non-blocking and
shared-pointer calls) on the volume. Checks:

- --clock (and --stats' clock) estimate the compute node's offset as the
  shift plus what the drift added by its last sample, within the error
  bound, its drift as +1 %, and the storage node's offset as 0;
- after alignment every disk operation carrying a CallID of either job lies
  within [start - E, end + E] of its call (from the call's start to the end
  of its completion record), or of its collective group's span, where E is
  the sum of the two nodes' error bounds; every read or write call has at
  least one; the same check on --no-align times fails for every operation;
- --stats --format json of known_io matches figures worked out below by
  hand, and without alignment its disk operations match no call.

    test_gluster_clock.py --collector=... --agent=... --export=... --client=...
        --mpiexec=... --app=MPIIO_MIX --known-app=KNOWN_IO --preload-prefix=...
        --volume-sh=... --xlator-dir=...
Exit 77 (skipped) without root, /dev/fuse or the faketime wrapper.
"""
import collections
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Deployment, parse_bins, sanitizer_env  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import check, failures  # noqa: E402

SHIFT_NS = 3_000_000_000
RATE = 1.01
FAKETIME_SPEC = f"+3s x{RATE}"
COMPUTE, STORAGE = "compute", "storage"
NPROCS = 4
B = 65536                  # known_io's block
N = 4                      # known_io's independent blocks per rank
MIX_B = 65536


def fail(msg):
    raise AssertionError(msg)


def samples(log):
    try:
        with open(log, errors="replace") as f:
            return sum("clock: offset" in line for line in f)
    except FileNotFoundError:
        return 0


def wait_samples(log, n, proc, timeout=30):
    deadline = time.time() + timeout
    while samples(log) < n:
        if time.time() > deadline or proc.poll() is not None:
            fail(f"no clock sample {n} in {log}:\n" + open(log, errors="replace").read()[-3000:])
        time.sleep(0.05)


# Runs under the faketime wrapper, so that the agent, mpiexec and the ranks
# share one fake clock (rate included). Once the agent has a clock sample:
# a one-rank warm-up on a local file creates the CallID registry, and a
# second later, when the FUSE client's once-a-second retry is sure to find
# it, the two jobs on the volume; then two more samples, so that every event
# lies between samples, and a clean stop.
NODE_SCRIPT = r"""
set -u
samples() { grep -c 'clock: offset' "$LOG" 2>/dev/null || true; }
wait_samples() {
    local deadline=$((SECONDS + 30))
    until [ "$(samples)" -ge "$1" ]; do
        [ $SECONDS -ge $deadline ] && { echo "node: no clock sample $1" >&2; exit 1; }
        sleep 0.05
    done
}
"$AGENT" --collector "$COLLECTOR" --listen "$LISTEN" --node "$NODE" \
    --clock-interval 1s 2>"$LOG" &
APID=$!
trap 'kill $APID 2>/dev/null' EXIT
wait_samples 1
# Behind the ASan runtime (the ranks are instrumented), ahead of the client
# library, so that the library's clock readings are the fake ones.
RANK_PRELOAD="$PRELOAD_PREFIX$LD_PRELOAD:$CLIENT"
run() {
    job=$1 n=$2
    shift 2
    "$MPIEXEC" -n "$n" -genv LD_PRELOAD "$RANK_PRELOAD" -genv IOTRACE_JOB_ID "$job" "$@" ||
        { echo "node: job $job failed" >&2; exit 1; }
}
run "$WARMUP_JOB" 1 "$KNOWN_APP" "$WARMUP_FILE" 4096 1
sleep 1.2
run "$KNOWN_JOB" $NPROCS "$KNOWN_APP" "$KNOWN_FILE" $B $N
run "$MIX_JOB" $NPROCS "$MIX_APP" "$MIX_FILE" $MIX_B
wait_samples $(($(samples) + 2))
kill -TERM $APID
wait $APID
"""


def run_compute_node(bins, dep, env_vars):
    script = os.path.join(dep.tmp, "compute.sh")
    with open(script, "w") as f:
        f.write(NODE_SCRIPT)
    env = dict(os.environ, **env_vars)
    # Only CLOCK_REALTIME is shifted: timeouts stay on the true monotonic clock.
    env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
    # The agent is instrumented in the sanitizer build and must accept
    # libfaketime ahead of the ASan runtime.
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0").lstrip(":")
    cmd = ["faketime", "-f", FAKETIME_SPEC, "bash", script]
    t0 = time.time_ns()
    node = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = node.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        os.killpg(node.pid, signal.SIGKILL)
        out, err = node.communicate()
        err += "\ncompute node timed out"
    # The wrapper shares its clock with its children through shared memory
    # named after its pid, which a killed wrapper leaves behind.
    for name in (f"faketime_shm_{node.pid}", f"sem.faketime_sem_{node.pid}"):
        try:
            os.unlink(os.path.join("/dev/shm", name))
        except OSError:
            pass
    if node.returncode != 0:
        fail(f"compute node failed ({node.returncode}):\n{out}\n{err}\n"
             + open(env_vars["LOG"], errors="replace").read()[-3000:])
    return t0


class Volume:
    def __init__(self, bins, dep, endpoint, registry):
        self.bins = bins
        self.dir = os.path.join(dep.tmp, "vol")
        self.mnt = os.path.join(dep.tmp, "mnt")
        args = [bins["volume_sh"], "start", "--type", "distribute", "--bricks", "2",
                "--dir", self.dir, "--mount", self.mnt, "--xlator-dir", bins["xlator_dir"],
                "--agent", endpoint, "--registry", registry, "--fresh"]
        # The bricks' libiotrace-server names its node from the environment.
        env = dict(os.environ, IOTRACE_NODE=STORAGE)
        if bins["preload_prefix"]:
            # As in test_gluster.py: the translators need the ASan runtime in
            # the uninstrumented GlusterFS daemons; their exit-time leaks are
            # not ours.
            env["LD_PRELOAD"] = bins["preload_prefix"].rstrip(":")
            env["ASAN_OPTIONS"] = "detect_leaks=0"
        res = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
        if res.returncode != 0:
            fail(f"volume.sh start failed:\n{res.stdout}\n{res.stderr}")

    def stop(self):
        subprocess.run([self.bins["volume_sh"], "stop", "--dir", self.dir],
                       capture_output=True, text=True, timeout=120)


def export(bins, dep, *args):
    r = subprocess.run([bins["export"], "--store", dep.store, *args], capture_output=True,
                       text=True, timeout=120)
    if r.returncode != 0:
        fail(f"iotrace-export {' '.join(args)}: rc {r.returncode}: {r.stderr}")
    return r.stdout


def jsonl(bins, dep, *args):
    return [json.loads(line) for line in export(bins, dep, "--jsonl", "-", *args).splitlines()]


def settle(bins, dep, want_calls):
    """The events once every call is in and disk events stop coming."""
    last, stable = -1, 0
    deadline = time.time() + 60
    while time.time() < deadline:
        ev = jsonl(bins, dep)
        calls = collections.Counter(e["job"] for e in ev if e["kind"] == "mpiio")
        if all(calls[j] >= n for j, n in want_calls.items()) and len(ev) == last:
            stable += 1
            if stable >= 3:
                return
        else:
            stable = 0
        last = len(ev)
        time.sleep(0.4)
    fail(f"events did not settle\n{dep.logs()}")


def parse_time(s):
    # 2026-01-05T10:00:00.049000000Z: nanoseconds do not fit datetime.
    whole, frac = s.rstrip("Z").split(".")
    t = datetime.datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(
        tzinfo=datetime.timezone.utc)
    return int(t.timestamp()) * 1_000_000_000 + int(frac.ljust(9, "0"))


def clock_report(text):
    nodes = {}
    for line in text.splitlines():
        fields = line.split()
        if fields:
            nodes[fields[0]] = dict(f.split("=", 1) for f in fields[1:])
    return nodes


def check_clocks(nodes, t0):
    for n in (COMPUTE, STORAGE):
        if not check(n in nodes and nodes[n]["samples"] != "0",
                     f"--clock has no samples for {n}: {nodes}"):
            fail("no clock samples")
    c, s = nodes[COMPUTE], nodes[STORAGE]
    # libfaketime: fake = real + shift + (real - wrapper start) * (rate - 1),
    # so at the compute node's last sample the collector's clock is behind
    # by the shift plus what the drift added since the wrapper started (t0,
    # taken just before; the few ms between the two move this by 1 % of them).
    last = parse_time(c["last"])
    want = -(SHIFT_NS + (last - t0) * (RATE - 1))
    off_c, err_c = int(c["offset_ns"]), int(c["error_ns"])
    off_s, err_s = int(s["offset_ns"]), int(s["error_ns"])
    print(f"--clock: {COMPUTE} offset {off_c} ns (shift and drift give {want:.0f}), "
          f"error bound {err_c} ns, drift {c['drift_ppm']} ppm, {c['samples']} samples; "
          f"{STORAGE} offset {off_s} ns, error bound {err_s} ns, {s['samples']} samples")
    check(abs(off_c - want) <= err_c + 2_000_000,
          f"{COMPUTE} offset {off_c} ns, expected {want:.0f} within {err_c} ns + 2 ms")
    check(abs(float(c["drift_ppm"]) - (RATE - 1) * 1e6) < 300,
          f"{COMPUTE} drift {c['drift_ppm']} ppm, expected about {(RATE - 1) * 1e6:+.0f}")
    check(abs(off_s) <= err_s, f"{STORAGE} offset {off_s} ns beyond its error bound {err_s} ns")
    check(abs(float(s["drift_ppm"])) < 200, f"{STORAGE} drift {s['drift_ppm']} ppm on one clock")
    for n, e in ((COMPUTE, err_c), (STORAGE, err_s)):
        check(0 < e < 5_000_000, f"{n}: error bound {e} ns is not a few ms at most")
    return err_c + err_s


COMPLETIONS = ("MPI_Wait", "MPI_Test")


def spans(calls):
    """(job, CallID) -> (start, end): from the call's start to the end of
    its completion record, widened to its collective group's span."""
    own = {}
    groups = collections.defaultdict(set)
    for e in calls:
        key = (e["job"], e["callid"])
        lo, hi = own.get(key, (e["t_start"], e["t_end"]))
        own[key] = (min(lo, e["t_start"]), max(hi, e["t_end"]))
        if e.get("coll_seq") and not e["func"].startswith(COMPLETIONS) \
                and not e["func"].endswith("_end"):
            groups[(e["job"], e["file"], e["coll_seq"])].add(key)
    out = dict(own)
    for members in groups.values():
        lo = min(own[k][0] for k in members)
        hi = max(own[k][1] for k in members)
        for k in members:
            out[k] = (lo, hi)
    return out, groups


def deviations(events, jobs):
    """Per disk operation with a CallID of one of jobs: (excess, margin, op)
    -- how far it lies outside its call's (or group's) span, 0 inside, and
    how far inside it lies from the nearer edge, negative outside; the
    operations whose CallID names no call; the jobs' calls; and the CallIDs
    whose call, or a member of whose group, has a disk operation."""
    calls = [e for e in events if e["kind"] == "mpiio" and e["job"] in jobs]
    span, groups = spans(calls)
    devs, unknown = [], []
    hit = set()
    for d in events:
        if d["kind"] != "disk" or d["job"] not in jobs or d["callid"] is None:
            continue
        key = (d["job"], d["callid"])
        if key not in span:
            unknown.append(d)
            continue
        lo, hi = span[key]
        devs.append((max(lo - d["t_start"], d["t_end"] - hi, 0),
                     min(d["t_start"] - lo, hi - d["t_end"]), d))
        hit.add(key)
    for members in groups.values():
        if members & hit:
            hit |= members
    return devs, unknown, calls, hit


def check_alignment(aligned, raw, jobs, files, err, offsets):
    devs, unknown, calls, hit = deviations(aligned, jobs)
    check(not unknown, f"{len(unknown)} disk operations carry a CallID no call has: {unknown[:3]}")
    by_job = collections.Counter(d["job"] for _, _, d in devs)
    outside = [(dev, d) for dev, _, d in devs if dev > err]
    worst = max((dev for dev, _, _ in devs), default=0)
    # How close to an edge of its span an operation came: what alignment
    # had to get right.
    margin = min((m for _, m, _ in devs), default=None)
    print(f"aligned: {len(devs)} disk operations checked ({dict(by_job)}), "
          f"{len(outside)} outside their call's span +- {err} ns; largest excess {worst} ns, "
          f"closest to an edge {margin} ns")
    check(not outside, f"{len(outside)} disk operations outside their call's span +- {err} ns, "
                       f"e.g. by {outside[0][0] if outside else 0} ns: "
                       f"{outside[0][1] if outside else ''}")
    # Every read or write call caused a disk operation (a collective: its group).
    data = [e for e in calls if e["bytes"] and not e["func"].startswith(COMPLETIONS)
            and not e["func"].endswith("_end") and ("read" in e["func"] or "write" in e["func"])]
    missed = [e for e in data if (e["job"], e["callid"]) not in hit]
    check(not missed, f"{len(missed)} of {len(data)} read/write calls have no disk operation: "
                      f"{[(e['func'], e['mpi_rank']) for e in missed[:10]]}")
    # Every read and write of the files on the bricks carries a CallID.
    untagged = [e for e in aligned if e["kind"] == "disk" and e["func"] in ("readv", "writev")
                and e["file"] in files and e["callid"] is None]
    check(not untagged, f"{len(untagged)} disk reads/writes of the jobs' files without a CallID: "
                        f"{untagged[:3]}")

    raw_devs, _, _, _ = deviations(raw, jobs)
    inside_raw = [d for dev, _, d in raw_devs if dev <= err]
    least = min((dev for dev, _, _ in raw_devs), default=0)
    print(f"--no-align: {len(raw_devs) - len(inside_raw)} of {len(raw_devs)} outside; "
          f"smallest excess {least} ns")
    check(len(raw_devs) == len(devs), "--no-align exports other disk operations")
    check(not inside_raw, f"{len(inside_raw)} disk operations lie within their call's span "
                          f"even on the nodes' own clocks: the check would pass without alignment")

    # Each node's last offset applied to all its times, as if the clocks
    # did not drift: the compute node's earlier events stay tens of ms off.
    held = [dict(e, t_start=e["t_start"] + offsets[e["node"]],
                 t_end=e["t_end"] + offsets[e["node"]]) for e in raw if e["node"] in offsets]
    held_devs, _, _, _ = deviations(held, jobs)
    held_out = [dev for dev, _, _ in held_devs if dev > err]
    print(f"one offset per node, no interpolation: {len(held_out)} of {len(held_devs)} outside, "
          f"by {min(held_out, default=0)} to {max(held_out, default=0)} ns")
    check(held_out, "the drift is too small to tell interpolation from one offset")
    return by_job


def hist(n_ops, calls):
    h = {"0": 0, "1": 0, "2": 0, "3-4": 0, "5-8": 0, "9-16": 0, ">16": 0}
    bucket = ("0" if n_ops == 0 else "1" if n_ops == 1 else "2" if n_ops == 2 else
              "3-4" if n_ops <= 4 else "5-8" if n_ops <= 8 else "9-16" if n_ops <= 16 else ">16")
    h[bucket] = calls
    return h


def known_stats():
    """--stats of known_io on the distribute volume, by hand. The file lives
    on one brick. Every read or write system call of B = 64 KiB is one FUSE
    request (with direct I/O the mount splits one at 32 pages of the
    caller's buffer; 64 KiB span at most 17), so one writev or readv there:
    one for each independent call, P for each collective, whose aggregator
    moves the P blocks one at a time. A collective's P disk operations count
    for each of its P member calls and, in disk_bytes, once. Each rank's
    open(2) of the file is one `open` on the brick and each close(2) one
    `flush`; opens and closes are collective too, so each call counts its
    group's P. Every byte requested is read or written once: amplification
    1."""
    P = NPROCS
    coll_ops = P

    def fn(count, nbytes, ops_each, disk_bytes):
        return {"count": count, "bytes": nbytes,
                "disk_ops_per_call": {"mean": float(ops_each), "max": ops_each,
                                      "histogram": hist(ops_each, count)},
                "disk_bytes": disk_bytes}

    functions = {
        "MPI_File_open": fn(P, 0, P, 0),
        "MPI_File_write_at": fn(P * N, P * N * B, 1, P * N * B),
        "MPI_File_read_at": fn(P * N, P * N * B, 1, P * N * B),
        "MPI_File_write_at_all": fn(P, P * B, coll_ops, P * B),
        "MPI_File_read_at_all": fn(P, P * B, coll_ops, P * B),
        "MPI_File_close": fn(P, 0, P, 0),
    }
    ops = P + 2 * P * N + 2 * coll_ops + P
    disk_bytes = 2 * P * N * B + 2 * P * B
    return functions, {"ops": ops, "bytes": disk_bytes}, 1.0


def check_known_stats(bins, dep, job, nodes):
    report = json.loads(export(bins, dep, "--stats", "--format", "json", "--job", job))
    jobs = {j["job"]: j for j in report["jobs"]}
    if not check(set(jobs) == {job}, f"--stats --job {job} reports {sorted(jobs)}"):
        return
    got = jobs[job]
    functions, server, amplification = known_stats()
    check(sorted(got["functions"]) == sorted(functions),
          f"functions {sorted(got['functions'])}, expected {sorted(functions)}")
    for name, want in functions.items():
        g = got["functions"].get(name)
        if g is None:
            continue
        sub = {k: g[k] for k in want}
        check(sub == want, f"{name}: {json.dumps(sub)}\n  expected {json.dumps(want)}")
        check(g["time_ns"] > 0 and g["p50_ns"] <= g["p99_ns"], f"{name}: durations {g}")
    servers = got["servers"]
    check(len(servers) == 1, f"{len(servers)} servers hold the file: {servers}")
    for name, s in servers.items():
        check(name.endswith("/bricks/b0") or name.endswith("/bricks/b1"), f"server name {name}")
        check({k: s[k] for k in ("ops", "bytes")} == server,
              f"server {name}: {s}, expected {server}")
        check(s["busy_ns"] > 0, f"server {name} never busy")
    for k, want in (("amplification", amplification), ("unmatched_calls", 0),
                    ("unmatched_disk_ops", 0), ("dropped_events", 0)):
        check(got[k] == want, f"{k} {got[k]}, expected {want}")
    check(got["disk_time_share"] is not None and got["disk_time_share"] > 0,
          f"disk_time_share {got['disk_time_share']}")
    # The job's figures come from the samples that align its own events, a
    # subset of what --clock summarises: no smaller a round trip, no larger
    # an error bound, and an offset that moved only by the drift since
    # (1 % of the seconds between the job's end and the last sample).
    # tests/unit/test_clockmap.c checks the subset exactly.
    for n in (COMPUTE, STORAGE):
        g, all_ = got["clock"].get(n), {k: int(nodes[n][k]) for k in ("offset_ns", "rtt_ns",
                                                                       "error_ns")}
        check(g is not None and g["rtt_ns"] >= all_["rtt_ns"] and
              g["error_ns"] <= all_["error_ns"] and
              abs(g["offset_ns"] - all_["offset_ns"]) <= 100_000_000,
              f"--stats clock of {n}: {g}, --clock over all samples says {all_}")
    check(sorted(got["clock"]) == [COMPUTE, STORAGE], f"--stats clock nodes {sorted(got['clock'])}")
    print(f"--stats of {job}: {len(functions)} functions, server ops and bytes, amplification "
          f"{got['amplification']}, nothing unmatched: as worked out by hand")

    # On the nodes' own clocks every call starts 3 s after its disk
    # operations, beyond the 2 s grace: nothing matches.
    raw = json.loads(export(bins, dep, "--stats", "--format", "json", "--job", job,
                            "--no-align"))["jobs"][0]
    data_calls = 2 * NPROCS * N + 2 * NPROCS
    check(raw["unmatched_disk_ops"] == server["ops"] and raw["unmatched_calls"] == data_calls,
          f"--no-align: unmatched_disk_ops {raw['unmatched_disk_ops']} (want {server['ops']}), "
          f"unmatched_calls {raw['unmatched_calls']} (want {data_calls})")


def main():
    bins = parse_bins(sys.argv[1:])
    for k in ("volume_sh", "xlator_dir", "known_app"):
        if k not in bins:
            raise SystemExit(f"missing argument --{k.replace('_', '-')}")
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("skipped: needs root and /dev/fuse")
        sys.exit(77)
    if not shutil.which("faketime"):
        print("skipped: faketime (package faketime) not installed")
        sys.exit(77)
    start = time.time()
    dep = Deployment(bins, node=STORAGE)
    registry = f"/iotrace-clock-test-{os.getpid()}"
    dep.start_collector()
    storage_log = os.path.join(dep.tmp, "agent.log")
    # The storage agent is the Deployment's agent (its log, its stop).
    dep.agent = subprocess.Popen(
        [bins["agent"], "--collector", f"tcp://127.0.0.1:{dep.port}", "--listen", dep.endpoint,
         "--node", STORAGE, "--clock-interval", "1s"], stderr=open(storage_log, "ab"))
    vol = None
    try:
        wait_samples(storage_log, 1, dep.agent)
        vol = Volume(bins, dep, dep.endpoint, registry)
        pid = os.getpid()
        jobs = {"known": f"clock-known-{pid}", "mix": f"clock-mix-{pid}"}
        files = {"known": os.path.join(vol.mnt, "known.dat"),
                 "mix": os.path.join(vol.mnt, "mix.dat")}
        # Created here: GlusterFS 10's FUSE client turns direct I/O off for a
        # file several processes open while it is being created
        # (test_gluster.py), and known_io opens without MPI_MODE_CREATE.
        warmup = os.path.join(dep.tmp, "warmup.dat")
        for path in (*files.values(), warmup):
            open(path, "wb").close()
        compute_log = os.path.join(dep.tmp, "agent-compute.log")
        compute_ep = "ipc://" + os.path.join(dep.tmp, "compute.sock")
        # mpiexec passes its environment on to the ranks.
        t0 = run_compute_node(bins, dep, {
            "IOTRACE_AGENT": compute_ep, "IOTRACE_NODE": COMPUTE, "IOTRACE_REGISTRY": registry,
            "MPIIO_MIX_NO_DIGEST": "1", **sanitizer_env(bins),
            "AGENT": bins["agent"], "COLLECTOR": f"tcp://127.0.0.1:{dep.port}",
            "LISTEN": compute_ep, "NODE": COMPUTE,
            "LOG": compute_log, "MPIEXEC": bins["mpiexec"], "CLIENT": bins["client"],
            "PRELOAD_PREFIX": bins["preload_prefix"],
            "NPROCS": str(NPROCS), "B": str(B), "N": str(N), "MIX_B": str(MIX_B),
            "KNOWN_APP": bins["known_app"], "MIX_APP": bins["app"],
            "WARMUP_JOB": f"clock-warmup-{pid}", "WARMUP_FILE": warmup,
            "KNOWN_JOB": jobs["known"], "KNOWN_FILE": files["known"],
            "MIX_JOB": jobs["mix"], "MIX_FILE": files["mix"]})
        settle(bins, dep, {jobs["known"]: NPROCS * (2 * N + 4), jobs["mix"]: 1})
        # Samples after the last disk operation: all of them lie in the
        # storage node's sampled span too.
        wait_samples(storage_log, samples(storage_log) + 2, dep.agent)
        vol.stop()
        vol = None
        # No more samples: every export below sees the same ones.
        dep.agent.send_signal(signal.SIGTERM)
        if dep.agent.wait(timeout=30) != 0:
            fail(f"the storage agent exited with {dep.agent.returncode}\n{dep.logs()}")

        nodes = clock_report(export(bins, dep, "--clock"))
        err = check_clocks(nodes, t0)
        aligned = jsonl(bins, dep)
        raw = jsonl(bins, dep, "--no-align")
        mine = [e for e in aligned if e.get("job") in jobs.values() and e["kind"] != "drop"]
        for n in (COMPUTE, STORAGE):
            first, last = parse_time(nodes[n]["first"]), parse_time(nodes[n]["last"])
            ev = [e for e in mine if e["node"] == n]
            check(ev and first <= min(e["t_start"] for e in ev)
                  and max(e["t_end"] for e in ev) <= last,
                  f"events of {n} outside its sampled span: the error bound does not hold there")
        disk_files = {"/" + os.path.basename(p) for p in files.values()}
        by_job = check_alignment(aligned, raw, set(jobs.values()), disk_files, err,
                                 {n: int(nodes[n]["offset_ns"]) for n in (COMPUTE, STORAGE)})
        known_ops = known_stats()[1]["ops"]
        check(by_job[jobs["known"]] == known_ops,
              f"{by_job[jobs['known']]} disk operations of known_io checked, expected {known_ops}")
        # mpiio_mix: at least one per independent read or write per rank
        # (write_at, read_at, iwrite_at, iread_at, write_shared, write, read,
        # write_at_c).
        check(by_job[jobs["mix"]] >= 8 * NPROCS,
              f"only {by_job[jobs['mix']]} disk operations of mpiio_mix checked")
        check_known_stats(bins, dep, jobs["known"], nodes)
    finally:
        if vol:
            vol.stop()
        if failures:
            # Deployment.stop keeps the directory for a post-mortem.
            os.environ["IOTRACE_KEEP_TEST_DIR"] = "1"
        dep.stop()
        try:
            os.unlink(f"/dev/shm{registry}-{os.geteuid()}")
        except OSError:
            pass
    if failures:
        print(f"{len(failures)} checks failed", file=sys.stderr)
        sys.exit(1)
    print(f"PASS ({time.time() - start:.1f} s)")


if __name__ == "__main__":
    main()
