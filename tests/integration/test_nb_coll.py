#!/usr/bin/env python3
"""Non-blocking collectives completed together: tests/mpi/nb_coll under
`mpiexec -n 4` (4 x MPI_File_iwrite_at_all, iread_at_all, iwrite_all and
iread_all per rank, each four completed by one MPI_Waitall, every rank an
aggregator) with the library preloaded.

ROMIO does the reads and writes of such requests inside the MPI_Waitall.
Checked:
- the output and the file are those of an untraced run;
- every POSIX transfer on the file that carries a CallID carries that of a
  call of its own rank, and one of a non-blocking collective lies within
  the byte range of its collective group (the calls of all ranks with its
  file and sequence number) and between the call's start and the end of
  the MPI_Waitall that completed it;
- each rank's every non-blocking collective call has transfers of its own
  (all four requests of a MPI_Waitall, not only the first).
"""
import collections
import filecmp
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Deployment, mpirun, parse_bins  # noqa: E402

NPROCS, K = 4, 4
NB = ("MPI_File_iwrite_at_all", "MPI_File_iread_at_all", "MPI_File_iwrite_all",
      "MPI_File_iread_all")
TRANSFERS = {"pread", "pwrite", "pread64", "pwrite64", "read", "write", "readv", "writev",
             "preadv", "pwritev", "preadv64", "pwritev64"}


def fail(msg):
    raise AssertionError(msg)


def run(bins, dep, name, env=None, preload=True):
    data = os.path.join(dep.tmp, name + ".bin")
    res = mpirun(bins, NPROCS, [bins["nb_app"], data], env=env, preload=preload)
    if res.returncode != 0 or "nb_coll ok" not in res.stdout:
        fail(f"{name}: exit {res.returncode}\n{res.stdout}\n{res.stderr}")
    return res.stdout.strip(), data


def check(events, data):
    """Returns (transfers checked, non-blocking calls) or fails."""
    calls = {e["callid"]: e for e in events
             if e["kind"] == "mpiio" and e["callid"] and e["role"] != "completion"}
    nb = [c for c in calls.values() if c["func"] in NB]
    if len(nb) != NPROCS * K * len(NB):
        fail(f"{len(nb)} non-blocking collective calls recorded, want {NPROCS * K * len(NB)}")
    groups = collections.defaultdict(list)
    for c in calls.values():
        if c["coll_seq"]:
            groups[(c["file"], c["coll_seq"])].append(c)
    span = {key: (min(c["offset"] for c in cs), max(c["offset"] + c["bytes"] for c in cs))
            for key, cs in groups.items()}
    done = {}  # CallID -> end of the completion that carried it
    for e in events:
        if e["kind"] == "mpiio" and e["func"] == "MPI_Waitall" and e["callid"] in calls:
            done[e["callid"]] = e["t_end"]
    per_call = collections.Counter()
    checked = 0
    for t in events:
        if t["kind"] != "posix" or t["file"] != data or t["func"] not in TRANSFERS:
            continue
        if not t["callid"]:
            continue
        c = calls.get(t["callid"])
        if not c:
            fail(f"{t['func']} at {t['offset']} carries CallID {t['callid']}, no call's")
        if c["mpi_rank"] != t["mpi_rank"]:
            fail(f"rank {t['mpi_rank']}: {t['func']} carries a CallID of rank {c['mpi_rank']}")
        if c["func"] not in NB:
            continue
        lo, hi = span[(c["file"], c["coll_seq"])]
        if not (lo <= t["offset"] and t["offset"] + t["bytes"] <= hi):
            fail(f"rank {t['mpi_rank']}: {t['func']} of {t['bytes']} bytes at {t['offset']} "
                 f"carries the CallID of {c['func']} #{c['coll_seq']}, whose group covers "
                 f"[{lo}, {hi})")
        end = done.get(c["callid"])
        if end is None:
            fail(f"rank {c['mpi_rank']}: {c['func']} #{c['coll_seq']} has no MPI_Waitall")
        if not (c["t_start"] <= t["t_start"] and t["t_end"] <= end):
            fail(f"rank {t['mpi_rank']}: {t['func']} at {t['offset']} outside its call "
                 f"{c['func']} #{c['coll_seq']} and the MPI_Waitall that completed it")
        per_call[c["callid"]] += 1
        checked += 1
    idle = [c for c in nb if not per_call[c["callid"]]]
    if idle:
        by = collections.Counter((c["mpi_rank"], c["func"]) for c in idle)
        fail(f"{len(idle)} of {len(nb)} non-blocking collective calls have no transfer with "
             f"their CallID, by rank and function: {dict(by)}")
    return checked, len(nb)


def main():
    bins = parse_bins(sys.argv[1:])
    dep = Deployment(bins).start()
    try:
        plain, plain_data = run(bins, dep, "plain", preload=False)
        print("untraced:", plain)
        job = f"nb-coll-{os.getpid()}"
        out, data = run(bins, dep, "traced",
                        env={"IOTRACE_AGENT": dep.endpoint, "IOTRACE_JOB_ID": job})
        if out != plain:
            fail(f"output {out!r}, untraced {plain!r}")
        if not filecmp.cmp(data, plain_data, shallow=False):
            fail("the file differs from the untraced run's")
        # Every rank's close, then until nothing more comes (the POSIX
        # records of the library's AIO threads travel on their own).
        events = dep.wait_for(lambda ev: sum(e["kind"] == "mpiio" and e["func"] == "MPI_File_close"
                                             for e in ev) >= NPROCS, job)
        for _ in range(20):
            time.sleep(0.5)
            later = dep.export(job)
            if len(later) == len(events):
                break
            events = later
        checked, n = check(events, data)
        print(f"ok: {checked} transfers of {n} non-blocking collective calls, each within its "
              f"call's group and completion, every call with transfers of its own")
    finally:
        dep.stop()


if __name__ == "__main__":
    main()
