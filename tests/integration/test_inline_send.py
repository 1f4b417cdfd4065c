#!/usr/bin/env python3
"""MPI-IO calls send their threads' batches themselves (IOTRACE_INLINE_SEND,
docs/client.md, Who sends), from several threads of a rank at once while
the sender thread sweeps the same rings: nothing may be lost, duplicated or
reordered within a thread, and the application's data must be right.

Each of 2 ranks runs THREADS threads of CALLS 8-byte MPI_File_write_at
(tests/mpi/thread_writes.c) with batches of 1024 records, so that every
thread's calls send about a dozen batches, and a flush interval long
enough that the sender thread sweeps only what they leave.  Checked for the default and for
IOTRACE_INLINE_SEND=0: the program's own check of its file; each process's
exit report (IOTRACE_VERBOSE) made = sent, nothing dropped, and batches sent
by MPI-IO calls (none when off); in the store, every thread's CALLS writes
with their CallIDs in order and its offsets, each with the pwrite ROMIO made
for it, and as many events as the processes made."""
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import Deployment, exit_reports, mpirun, parse_bins  # noqa: E402

NPROCS = 2
THREADS = 3
CALLS = 6000


def run(bins, dep, job, inline):
    data = os.path.join(dep.tmp, job + ".bin")
    env = {"IOTRACE_AGENT": dep.endpoint, "IOTRACE_JOB_ID": job, "IOTRACE_VERBOSE": "1",
           "IOTRACE_BATCH_EVENTS": "1024", "IOTRACE_INLINE_SEND": inline,
           # The sender thread's sweeps at the flush interval would take a
           # share of the batches that depends on the machine's speed.
           "IOTRACE_FLUSH_MS": "10000"}
    res = mpirun(bins, NPROCS, [bins["thread_app"], data, str(THREADS), str(CALLS)], env=env)
    assert res.returncode == 0 and res.stdout.strip() == "ok", (res.stdout, res.stderr)
    reports = exit_reports(res.stderr)
    assert len(reports) == NPROCS, res.stderr
    for pid, r in reports.items():
        assert r["made"] == r["sent"] and r["counted"] == 0 and r["lost"] == 0, (pid, r)
        by_calls = r["by_calls"]
        if inline == "1":
            # 2 * CALLS records per thread, a batch per 1024: the calls send
            # most, not those waiting while another thread's call held the
            # right to send (6 threads on 2 cores: 41-59 of about 70 seen).
            assert by_calls >= THREADS * 2 * CALLS // 1024 // 4, (pid, r)
        else:
            assert by_calls == 0, (pid, r)
    made = sum(r["made"] for r in reports.values())

    events = dep.wait_for(lambda ev: len(ev) >= made, job=job, timeout=60)
    assert len(events) == made, (len(events), made)
    assert not [e for e in events if e["kind"] == "drop"]
    writes = collections.defaultdict(list)
    inner = collections.Counter()
    for e in events:
        if e["kind"] == "mpiio" and e["func"] == "MPI_File_write_at":
            writes[(e["pid"], e["tid"])].append(e)
        elif e["kind"] == "posix" and e["func"] == "pwrite" and e["callid"]:
            inner[int(e["callid"], 16)] += 1
    assert len(writes) == NPROCS * THREADS, sorted(writes)
    for (pid, tid), ws in writes.items():
        assert len(ws) == CALLS, (pid, tid, len(ws))
        ws.sort(key=lambda e: e["t_start"])
        callids = [int(e["callid"], 16) for e in ws]
        assert callids == sorted(callids) and len(set(callids)) == CALLS, (pid, tid)
        offs = [e["offset"] for e in ws]
        assert all(b - a == 8 for a, b in zip(offs, offs[1:])), (pid, tid, offs[:5])
        assert all(inner[c] == 1 for c in callids), (pid, tid)
    calls = sum(r["by_calls"] for r in reports.values())
    return made, calls


def main():
    bins = parse_bins(sys.argv[1:])
    dep = Deployment(bins).start()
    try:
        made_on, calls_on = run(bins, dep, "inline-on", "1")
        made_off, calls_off = run(bins, dep, "inline-off", "0")
        print(f"ok: {NPROCS} ranks x {THREADS} threads x {CALLS} MPI_File_write_at: "
              f"{made_on} events stored, {calls_on} batches sent by the calls themselves; "
              f"with IOTRACE_INLINE_SEND=0 {made_off} events, {calls_off} by the calls")
    finally:
        dep.stop()


if __name__ == "__main__":
    main()
