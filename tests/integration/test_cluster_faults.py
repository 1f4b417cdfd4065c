#!/usr/bin/env python3
"""Faults of a cluster during a job (deploy/cluster.sh, docs/cluster.md;
figures in docs/reliability.md).

One cluster: a collector host, 2 compute hosts, a replicate volume on 2
storage hosts. Each phase runs steady_io (4 ranks, 2 per compute host, each
making about RATE MPI_File_write_at calls a second and saying how many it
made) and does one thing to the cluster while it runs:

- link: the path between compute1 and the collector host cut for 60 s
  (both routes blackholed), then restored;
- collector: the collector host stopped hard (every process SIGKILLed, its
  store stays on its disk) and started again 5 s later;
- disk: the collector host's store full for 30 s (one file fills it), then
  freed;
- storage: storage2 crashed mid-job (its brick and agent SIGKILLed);
- compute: compute2 cut off from the collector host at 3 s (its agent
  spools), crashed at 10 s (its ranks, agent and FUSE client SIGKILLed, the
  spool left on its disk), its path restored and the host started again.

For the first three: the job ends normally, every call each rank says it
made is stored exactly once (distinct CallIDs, as many as calls), every call
has its write on both bricks, nothing dropped. For storage: the job goes on
and ends normally; every call stored once; every call after the crash has
its write on storage1, and storage2's figures in --stats stop at the crash.
For compute: what compute2's agent had spooled arrives once it is back (its
ranks' calls stored up to the crash, without a gap in their CallIDs); what
died in the ranks' memory is counted per rank as the calls the bricks saw
and the store has not (their writes carry those CallIDs).
Each phase prints one line of figures: calls made, stored, duplicates,
dropped (counted), lost."""
import collections
import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
import cluster  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import check, failures  # noqa: E402

MOUNT = "/mnt/iotrace-test"
RATE = 60
RANK_BITS = 40   # a CallID's rank above its sequence (clientlib/core.c)


def steady(args):
    return os.path.join(os.path.dirname(args.app), "steady_io")


class Job(threading.Thread):
    """steady_io by cluster.sh mpiexec, in the background."""

    def __init__(self, c, args, job, seconds):
        super().__init__(daemon=True)
        self.c, self.args, self.job, self.seconds = c, args, job, seconds
        self.made, self.result, self.started = {}, None, time.time()

    def run(self):
        env = dict(os.environ, IOTRACE_JOB_ID=self.job)
        self.result = self.c.run("mpiexec", "-n", "4", steady(self.args), f"{MOUNT}/{self.job}",
                                 str(self.seconds), str(RATE), env=env, check=False,
                                 timeout=self.seconds + 240)
        for m in re.finditer(r"rank (\d+) calls (\d+)", self.result.stdout):
            self.made[int(m.group(1))] = int(m.group(2))

    def at(self, t):
        """Sleeps until t seconds after the job started."""
        time.sleep(max(0.0, self.started + t - time.time()))


def stored_calls(c, job):
    ev = [e for e in c.events(job) if e["job"] == job]
    calls = [e for e in ev if e["kind"] == "mpiio" and e["func"] == "MPI_File_write_at"]
    disk = [e for e in ev if e["kind"] == "disk" and e["func"] in cluster.DISK_RW]
    return ev, calls, disk


def settle(c, job, ranks=4, timeout=120):
    """Once the store has room and every agent has said, after this call,
    that it holds nothing (its status rides on its clock batches, every
    2 s; what an agent said before a fault is no news), and then the job's
    count stops growing. After a fault the agents resend on their own
    schedule: a count that stands still for a few seconds alone proves
    nothing."""
    import json
    deadline = time.time() + timeout
    held, since = {}, None
    while time.time() < deadline:
        if since is None and not collector_status(c).get("store_full", True):
            since = time.time()   # the store has room from here on
        r = c.exec("collector", "curl", "-sf", "http://127.0.0.1:8080/api/v1/nodes", check=False)
        nodes = json.loads(r.stdout)["nodes"] if r.returncode == 0 else []
        # reported_s: when the status arrived, which can be long after the
        # node's last PING (last_seen_s) while the store is full.
        held = {n["node"]: (n.get("agent") or {}).get("pending_batches")
                if since and (n.get("agent") or {}).get("reported_s", 0) > since + 3
                else "not heard from since" for n in nodes}
        if len(held) == 4 and all(v == 0 for v in held.values()):
            break
        time.sleep(1)
    else:
        check(False, f"the agents still hold batches after {timeout} s: {held}")
    # Longer than the collector's retry of a full store (5 s) and an agent's
    # clock batch (2 s): a resend would show in it.
    return c.wait_settled(job, ranks, timeout=timeout, quiet=8)


def figures(name, made, calls, dropped, extra=""):
    per_rank = collections.Counter(e["mpi_rank"] for e in calls)
    ids = collections.Counter(e["callid"] for e in calls)
    dup = sum(n - 1 for n in ids.values() if n > 1)
    total = sum(made.values())
    lost = total - len(ids) - dropped
    print(f"FIGURES {name}: calls made {total}, stored {len(calls)} ({len(ids)} distinct), "
          f"duplicates {dup}, dropped (counted) {dropped}, lost {lost}{extra}; "
          f"per rank made {dict(sorted(made.items()))} stored {dict(sorted(per_rank.items()))}")
    return per_rank, ids, dup, lost


def check_whole(c, name, job, thread, bricks=2):
    """Every call stored once, each with its write on every brick."""
    check(thread.result is not None and thread.result.returncode == 0,
          f"{name}: the job failed: {thread.result and (thread.result.stdout + thread.result.stderr)[-1500:]}")
    check(sorted(thread.made) == [0, 1, 2, 3], f"{name}: ranks that said their calls: {thread.made}")
    j = settle(c, job)
    ev, calls, disk = stored_calls(c, job)
    dropped = int(j.get("dropped", 0))
    per_rank, ids, dup, lost = figures(name, thread.made, calls, dropped,
                                       f", brick writes {len(disk)}")
    for r, n in thread.made.items():
        check(per_rank.get(r, 0) == n, f"{name}: rank {r} made {n} calls, {per_rank.get(r, 0)} stored")
    check(dup == 0, f"{name}: {dup} calls stored twice")
    check(dropped == 0, f"{name}: {dropped} events dropped")
    per_call = collections.Counter(e["callid"] for e in disk)
    short = [i for i in ids if per_call.get(i, 0) < bricks]
    check(not short, f"{name}: {len(short)} calls without a write on each of {bricks} bricks")
    return ev, calls, disk


def phase_link(c, args):
    job = "fault-link"
    t = Job(c, args, job, 67)
    t.start()
    t.at(4)
    c.run("link", "compute1", "down", "collector")
    cut = time.time()
    t.at(34)
    pending = agent_pending(c, "compute1")
    t.at(64)
    c.run("link", "compute1", "up", "collector")
    print(f"link: compute1 <-> collector cut for {time.time() - cut:.1f} s; "
          f"compute1's agent held {pending} batches at 30 s")
    check(pending is None or pending > 0, "link: compute1's agent held nothing while cut off")
    t.join()
    check_whole(c, "link down 60 s", job, t)


def agent_pending(c, host):
    """The pending batches of HOST's agent, from its last stats line."""
    log = os.path.join(cluster.DIR, "hosts", host, "log", "agent.log")
    try:
        m = re.findall(r"stats: .* pending=(\d+)", open(log).read())
    except OSError:
        return None
    return int(m[-1]) if m else None


def phase_collector(c, args):
    job = "fault-collector"
    t = Job(c, args, job, 16)
    t.start()
    t.at(6)
    c.run("crash", "collector")
    t.at(11)
    c.run("start", "collector")
    t.join()
    check_whole(c, "collector host stopped hard", job, t)


def collector_status(c):
    import json
    r = c.exec("collector", "curl", "-sf", "http://127.0.0.1:8080/api/v1/status", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else {}


def phase_disk(c, args):
    job = "fault-disk"
    t = Job(c, args, job, 37)
    t.start()
    t.at(4)
    c.run("disk", "collector", "full")
    full_seen = False
    while time.time() < t.started + 34:
        full_seen = full_seen or bool(collector_status(c).get("store_full"))
        time.sleep(1)
    c.run("disk", "collector", "free")
    print(f"disk: the collector's store full for 30 s; the collector said so: {full_seen}")
    check(full_seen, "disk: the collector never reported its store full")
    t.join()
    check_whole(c, "collector disk full 30 s", job, t)


def phase_storage(c, args):
    job = "fault-storage"
    t = Job(c, args, job, 18)
    t.start()
    t.at(8)
    c.run("crash", "storage2")
    crashed = time.time_ns()
    t.join()
    check(t.result.returncode == 0, f"storage: the job failed: {(t.result.stdout + t.result.stderr)[-1500:]}")
    # Back, its agent forwards what it spooled before the crash.
    c.run("start", "storage2")
    j = settle(c, job)
    ev, calls, disk = stored_calls(c, job)
    per_rank, ids, dup, lost = figures("storage host killed", t.made, calls, int(j.get("dropped", 0)))
    for r, n in t.made.items():
        check(per_rank.get(r, 0) == n, f"storage: rank {r} made {n} calls, {per_rank.get(r, 0)} stored")
    on1 = {e["callid"] for e in disk if e["node"] == "storage1"}
    late = [e for e in calls if e["t_start"] > crashed + 2_000_000_000]
    missing = [e for e in late if e["callid"] not in on1]
    print(f"storage: {len(late)} calls more than 2 s after the crash, {len(missing)} without a write on storage1")
    check(late and not missing, f"storage: calls after the crash without their write on storage1: {len(missing)}")
    st = c.stats(job)
    servers = {k.split(":")[0]: v for k, v in st["servers"].items()}
    print(f"storage: --stats servers {servers}")
    s1, s2 = servers.get("storage1", {}).get("ops", 0), servers.get("storage2", {}).get("ops", 0)
    check(s1 > s2, f"storage: storage2's absence not in the figures: ops storage1 {s1}, storage2 {s2}")


def phase_compute(c, args):
    job = "fault-compute"
    t = Job(c, args, job, 16)
    t.start()
    # Cut off from the collector first, so that its agent's spool holds
    # what its ranks made when the host goes.
    t.at(3)
    c.run("link", "compute2", "down", "collector")
    t.at(10)
    held = agent_pending(c, "compute2")
    c.run("crash", "compute2")
    t.join()
    print(f"compute: mpiexec exited {t.result.returncode} (compute2's ranks died); "
          f"compute2's agent held {held} batches at its last stats line before the crash")
    c.run("link", "compute2", "up", "collector")
    c.run("start", "compute2")
    # compute2's agent starts from its spool and forwards what it held.
    deadline = time.time() + 60
    while time.time() < deadline and agent_pending(c, "compute2") not in (0,):
        time.sleep(1)
    time.sleep(3)
    ev, calls, disk = stored_calls(c, job)
    placed = {e["mpi_rank"]: e["node"] for e in calls}
    lost_ranks = [r for r, h in placed.items() if h == "compute2"]
    check(len(lost_ranks) == 2, f"compute: ranks stored from compute2: {lost_ranks}")
    stored = collections.defaultdict(set)
    for e in calls:
        stored[e["mpi_rank"]].add(int(e["callid"], 16) & ((1 << RANK_BITS) - 1))
    seen = collections.defaultdict(set)
    for e in disk:
        if e["callid"] is not None:
            cid = int(e["callid"], 16)
            seen[cid >> RANK_BITS].add(cid & ((1 << RANK_BITS) - 1))
    total_lost = 0
    st = c.stats(job)
    by_rank = st.get("disk_only_calls_by_rank") or {}
    for r in sorted(lost_ranks):
        s = stored[r]
        gaps = (max(s) - min(s) + 1 - len(s)) if s else 0
        died = len(seen[r] - s)
        total_lost += died
        print(f"compute: rank {r} on compute2: {len(s)} calls stored (CallIDs {min(s) if s else '-'}.."
              f"{max(s) if s else '-'}, {gaps} missing between), {died} more seen by the bricks only: "
              f"died in the rank's memory")
        # Cut off from 3 s, crashed at 10 s: what arrived after 3 s came
        # from the spool.
        check(len(s) > 5 * RATE, f"compute: {len(s)} calls of rank {r} stored: compute2's spool did not arrive")
        check(gaps == 0, f"compute: rank {r}'s stored calls have {gaps} holes")
        # The store counts them too, per rank, from the CallIDs the bricks
        # carried (--stats disk_only_calls_by_rank).
        check(by_rank.get(str(r), 0) == died,
              f"compute: rank {r}: --stats disk_only_calls_by_rank says {by_rank.get(str(r), 0)}, "
              f"the bricks saw {died} calls the store lacks")
    print(f"FIGURES compute host crashed: calls stored from compute2 "
          f"{sum(len(stored[r]) for r in lost_ranks)}, seen by the bricks only {total_lost} "
          f"(counted per rank above; --stats disk_only_calls {st.get('disk_only_calls')} "
          f"{by_rank}), duplicates {len(calls) - len({e['callid'] for e in calls})}")
    check(len(calls) == len({e["callid"] for e in calls}), "compute: calls stored twice")


def main():
    args = cluster.parse_args()
    cluster.skip_unless_possible()
    phases = os.environ.get("IOTRACE_FAULTS", "link collector disk storage compute").split()
    with cluster.Cluster(args, "--mount", MOUNT, "--no-slurm") as c:
        c.exec("compute1", "chmod", "1777", MOUNT)
        for name in phases:
            t = time.time()
            globals()["phase_" + name](c, args)
            print(f"phase {name}: {time.time() - t:.0f} s")
    return cluster.finish(failures)


if __name__ == "__main__":
    sys.exit(main())
