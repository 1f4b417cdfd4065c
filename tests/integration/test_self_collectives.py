#!/usr/bin/env python3
"""Collective calls on handles of one rank each are not one collective.

tests/mpi/self_coll.c under mpiexec -n 4, while tests/server/registry_brick
(a storage server without a file system that reads the CallID registry)
records one disk operation for each MPI-IO call it sees in progress.  In
"self" every rank opens the same file with MPI_COMM_SELF and makes its
MPI_File_write_at_all and read_at_all calls, as Darshan's tst_mpio_pthread
does: the ranks' calls share file and collective sequence numbers, but each
is a collective of one rank, so --stats must count each call's own disk
operations: disk_ops_per_call mean = operations / calls, at most 1 per call
(before, the four ranks' calls were linked into groups and each was given
the group's operations: mean 4.0 where each caused 1).  In "world" the same
calls on a MPI_COMM_WORLD handle are collectives of four: each call is
given its group's operations, mean = 4 x operations / calls."""
import collections
import json
import os
import re
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(__file__))
from harness import Deployment, end_brick, mpirun, parse_bins, sanitizer_env  # noqa: E402

NPROCS, BLOCK, CALLS = 4, 4 << 20, 6
FUNCS = ("MPI_File_write_at_all", "MPI_File_read_at_all")


def traced(bins, dep, job, mode):
    registry = f"/iotrace-selfcoll-{os.getpid()}"
    env = {"IOTRACE_AGENT": dep.endpoint, "IOTRACE_JOB_ID": job, "IOTRACE_REGISTRY": registry}
    stop = os.path.join(dep.tmp, f"stop-{mode}")
    brick = subprocess.Popen([bins["brick"], f"{dep.node}:/bricks/b0", "self_coll", stop],
                             env=dict(os.environ, **env, **sanitizer_env(bins)),
                             stdout=subprocess.PIPE, text=True)
    out = []
    try:
        line = brick.stdout.readline()
        assert line.startswith("watching"), f"registry_brick did not start: {line!r}"
        reader = threading.Thread(target=lambda: out.extend(brick.stdout), daemon=True)
        reader.start()
        res = mpirun(bins, NPROCS, [bins["self_app"], os.path.join(dep.tmp, f"data-{mode}"),
                                    str(BLOCK), str(CALLS), mode], env=env, timeout=180)
        assert res.returncode == 0, f"self_coll {mode}: {res.stdout}{res.stderr}"
        open(stop, "w").close()
        brick.wait(timeout=60)
        reader.join(timeout=10)
    finally:
        end_brick(brick, registry)
    m = re.search(r"recorded (\d+) dropped (\d+)", "".join(out))
    assert m and brick.returncode == 0 and m.group(2) == "0", f"registry_brick: {out!r}"
    return int(m.group(1))


def check(bins, dep, mode):
    job = f"coll-{mode}"
    recorded = traced(bins, dep, job, mode)
    n_calls = NPROCS * (2 * CALLS + 2)  # the transfers, open and close

    def complete(ev):
        calls = [e for e in ev if e["kind"] == "mpiio"]
        disk = [e for e in ev if e["kind"] == "disk"]
        return len(calls) >= n_calls and len(disk) >= recorded

    events = dep.wait_for(complete, job=job, timeout=60)
    res = subprocess.run([bins["export"], "--store", dep.store, "--job", job, "--stats",
                          "--format", "json"], check=True, capture_output=True, text=True)
    stats = json.loads(res.stdout)["jobs"][0]
    seqs = collections.defaultdict(set)
    for e in events:
        if e["kind"] == "mpiio" and e["func"] in FUNCS:
            seqs[(e["func"], e["coll_seq"])].add(e["mpi_rank"])
    # The trap: the ranks' calls share (file, sequence number) in both modes.
    assert all(len(r) == NPROCS for r in seqs.values()), seqs
    members = 1 if mode == "self" else NPROCS
    figures = []
    for func in FUNCS:
        calls = {e["callid"] for e in events if e["kind"] == "mpiio" and e["func"] == func}
        ops = sum(1 for e in events if e["kind"] == "disk" and e["callid"] in calls)
        f = stats["functions"][func]
        per = f["disk_ops_per_call"]
        assert f["count"] == NPROCS * CALLS == len(calls), (func, f)
        assert ops > 0, f"{mode}: the brick saw none of the {func} calls"
        want = members * ops / len(calls)
        assert abs(per["mean"] - want) < 1e-9, (
            f"{mode}: {func} mean {per['mean']} disk operations per call, expected {want} "
            f"({ops} operations, {len(calls)} calls, {members} per collective)")
        if mode == "self":
            assert per["max"] == 1, (func, per)
        else:
            assert per["max"] >= 2, (func, per)
        figures.append(f"{func} {per['mean']:.2f} ops/call (max {per['max']}, {ops} ops)")
    assert stats["unmatched_disk_ops"] == 0, stats
    print(f"ok: {mode}: " + "; ".join(figures))


def main():
    bins = parse_bins(sys.argv[1:])
    dep = Deployment(bins).start()
    try:
        for mode in ("self", "world"):
            check(bins, dep, mode)
    finally:
        dep.stop()


if __name__ == "__main__":
    main()
