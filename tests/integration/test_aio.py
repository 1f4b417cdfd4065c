#!/usr/bin/env python3
"""POSIX AIO under libiotrace-client: tests/mpi/aio_mix under `mpiexec -n 1`
passes its own checks (answers of aio_error/aio_return/aio_suspend/
aio_cancel, data of MPI-IO's non-blocking calls, fork) both without the
library and with it; with it, the requests it took over are exported as
POSIX transfers of its AIO worker threads carrying the CallIDs of the MPI-IO
calls that submitted them."""
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import Deployment, mpirun, parse_bins  # noqa: E402

ROUNDS, K, BLK = 40, 16, 8192        # round_trip() in aio_mix.c
OVERLAP_ROUNDS = 20                  # overlapping_writes()
MANY, SMALL = 1100, 512              # many_outstanding()
NONBLOCKING = ("MPI_File_iwrite_at", "MPI_File_iread_at")
TRANSFERS = {"pread", "pwrite", "pread64", "pwrite64", "read", "write"}


def fail(msg):
    raise AssertionError(msg)


def run(bins, tmp, name, env=None, preload=True):
    work = os.path.join(tmp, name)
    os.mkdir(work)
    argv = [bins["aio_app"], work] + (["--expect-takeover"] if preload else [])
    res = mpirun(bins, 1, argv, env=env, preload=preload)
    if res.returncode != 0 or "aio_mix: ok" not in res.stdout:
        fail(f"{name}: exit {res.returncode}\n{res.stdout}\n{res.stderr}")
    print(f"{name}: {' / '.join(res.stdout.splitlines())}")
    return work


def by_file(events, work):
    files = collections.defaultdict(list)
    for e in events:
        if e["kind"] == "posix" and e["file"] and e["file"].startswith(work + "/"):
            files[os.path.basename(e["file"])].append(e)
    return files


def check_romio(events, files, main_tid):
    """Each iwrite_at/iread_at that the table had room for has exactly one
    transfer on a worker thread, with its CallID, offset and size; none runs
    on the application's thread."""
    calls = {e["callid"]: e for e in events
             if e["kind"] == "mpiio" and e["func"] in NONBLOCKING}
    want = 2 * ROUNDS * K + 2 * OVERLAP_ROUNDS + MANY
    if len(calls) != want:
        fail(f"{len(calls)} non-blocking calls recorded, want {want}")
    done = collections.Counter()
    for f in ("nb-a.bin", "nb-b.bin"):
        for t in files[f]:
            c = calls.get(t["callid"])
            if t["func"] not in TRANSFERS or not c:
                continue
            if t["tid"] == main_tid:
                fail(f"{c['func']} at {c['offset']} ran on the application's thread")
            if (t["offset"], t["bytes"], t["ret"]) != (c["offset"], c["bytes"], c["bytes"]):
                fail(f"{c['func']} at {c['offset']} ({c['bytes']} bytes): transfer {t}")
            if not c["t_start"] <= t["t_start"]:
                fail(f"{c['func']} at {c['offset']}: transfer before the call")
            done[t["callid"]] += 1
    if any(n != 1 for n in done.values()):
        fail("a request was transferred more than once")
    big = [c for c in calls.values() if c["bytes"] == BLK]
    missing = [c for c in big if c["callid"] not in done]
    if missing:
        fail(f"{len(missing)} of {len(big)} non-blocking calls have no transfer, e.g. {missing[0]}")
    small = sum(1 for c in calls.values() if c["bytes"] == SMALL and c["callid"] in done)
    if small < 1024:
        fail(f"only {small} of the {MANY} outstanding requests were taken over")
    return len(done)


def check_error_handler(events, files, main_tid):
    """Requests submitted from the error handler inside MPI_File_read_at
    carry its CallID; the one with a signal to deliver, and those made
    outside MPI-IO, were glibc's (no records)."""
    read_at = {e["callid"] for e in events if e["func"] == "MPI_File_read_at"}
    fifo_reads = [e for e in files["fifo1"] if e["func"] == "read" and e["ret"] == 16]
    if len(fifo_reads) != 2 or any(e["callid"] not in read_at or e["tid"] == main_tid
                                   for e in fifo_reads):
        fail(f"FIFO reads: {fifo_reads}")
    writes = [e for e in files["regular.bin"] if e["func"] == "pwrite"]
    if sorted((e["offset"], e["ret"]) for e in writes) != [(0, 256), (0, 4096), (8192, 512)]:
        fail(f"writes of the error handler's requests: {writes}")
    if any(e["callid"] not in read_at for e in writes):
        fail(f"writes without the CallID of MPI_File_read_at: {writes}")
    glibc = [e for e in files["direct.bin"] if e["func"] in TRANSFERS] + \
        [e for e in files["fifo2"] if e["func"] in ("read", "pread")]
    if glibc:
        fail(f"requests glibc ran were recorded: {glibc}")
    if any(e["func"] == "pread" and e["bytes"] == 64 for e in files["regular.bin"]):
        fail("the request with a signal to deliver was taken over")


def main():
    bins = parse_bins(sys.argv[1:])
    dep = Deployment(bins).start()
    try:
        run(bins, dep.tmp, "plain", preload=False)
        job = f"aio-{os.getpid()}"
        work = run(bins, dep.tmp, "traced", {"IOTRACE_AGENT": dep.endpoint, "IOTRACE_JOB_ID": job})
        n_calls = 2 * ROUNDS * K + 2 * OVERLAP_ROUNDS + MANY
        events = dep.wait_for(lambda ev: sum(e["func"] in NONBLOCKING for e in ev) >= n_calls
                              and sum(e["func"] == "MPI_File_close" for e in ev) >= 4, job=job)
        main_tid = next(e["tid"] for e in events if e["kind"] == "mpiio")
        files = by_file(events, work)
        n = check_romio(events, files, main_tid)
        check_error_handler(events, files, main_tid)
        drops = [e for e in events if e["kind"] == "drop"]
        if drops:
            fail(f"events were dropped: {drops}")
        print(f"ok: {n} requests taken over, {len(events)} events")
    finally:
        dep.stop()


if __name__ == "__main__":
    main()
