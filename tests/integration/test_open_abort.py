#!/usr/bin/env python3
"""Ranks whose MPI_File_open fails and that end the job with MPI_Abort (as
ROMIO's excl.c and fstype_prefix.c do): what each rank recorded before the
abort reaches the store with its rank, or is counted.

tests/mpi/open_abort.c under mpiexec -n 4: every rank writes a file of its
own, then fails to open DIR/missing/file read-only; "all": every rank calls
MPI_Abort, "one": rank 0 does and the launcher kills the others in
MPI_Barrier.  Each run must store the four failed opens, each with its rank
(before the fix none was stored and --list-jobs said dropped=0), every
MPI-IO and POSIX event must carry a rank of the job, and for every rank
that reported its totals at the abort (IOTRACE_VERBOSE=1), events stored
plus events counted in drop records equal what it made."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import Deployment, accounted, exit_reports, mpirun, parse_bins  # noqa: E402

NPROCS = 4


def run(bins, dep, mode):
    job = f"abort-{mode}"
    work = os.path.join(dep.tmp, mode)
    os.mkdir(work)
    env = {"IOTRACE_AGENT": dep.endpoint, "IOTRACE_JOB_ID": job, "IOTRACE_VERBOSE": "1"}
    res = mpirun(bins, NPROCS, [bins["abort_app"], work, mode], env=env)
    assert res.returncode != 0, f"{mode}: the program should have aborted:\n{res.stderr}"
    # What the ranks print last may not reach mpiexec's standard error:
    # Hydra kills them and their proxies as soon as one aborts, so neither
    # the library's lines nor MPICH's own "application called MPI_Abort"
    # are certain.  The store is what is checked.

    def failed_opens(ev):
        return [e for e in ev if e["kind"] == "mpiio" and e["func"] == "MPI_File_open"
                and e["ret"] != 0]

    try:
        events = dep.wait_for(lambda ev: len(failed_opens(ev)) >= NPROCS, job=job, timeout=20)
    except AssertionError:
        events = dep.export(job)
        opens = failed_opens(events)
        raise AssertionError(f"{mode}: {len(opens)} failed MPI_File_open stored of {NPROCS} "
                             f"(ranks {sorted(e['mpi_rank'] for e in opens)}); "
                             f"--list-jobs: {list_jobs(bins, dep)}")
    opens = failed_opens(events)
    assert sorted(e["mpi_rank"] for e in opens) == list(range(NPROCS)), opens
    assert all(e["file"] and e["file"].endswith("/missing/file") for e in opens), opens
    ranked = [e for e in events if e["kind"] in ("mpiio", "posix")]
    unranked = [e for e in ranked if e["mpi_rank"] not in range(NPROCS)]
    assert not unranked, f"{mode}: {len(unranked)} events without a rank, e.g. {unranked[:3]}"
    writes = [e for e in ranked if e["func"] == "MPI_File_write_at"]
    assert sorted(e["mpi_rank"] for e in writes) == list(range(NPROCS)), writes

    reports = exit_reports(res.stderr)  # those that got through (above)
    have = accounted(dep.export(job))
    for pid, r in reports.items():
        assert have[pid] == r["made"], (mode, pid, have[pid], r)
        assert r["lost"] == 0, (mode, pid, r)
    listed = list_jobs(bins, dep, job)
    assert listed.startswith(f"{job} ranks={NPROCS} "), listed
    print(f"ok: {mode}: {len(opens)} failed opens stored with ranks "
          f"{sorted(e['mpi_rank'] for e in opens)}, {len(ranked)} events all ranked, "
          f"{len(reports)} ranks' totals at MPI_Abort accounted for; {listed}")


def list_jobs(bins, dep, job=None):
    out = subprocess.run([bins["export"], "--store", dep.store, "--list-jobs"], check=True,
                         capture_output=True, text=True).stdout.splitlines()
    return next((line for line in out if job and line.startswith(job + " ")), "\n".join(out))


def main():
    bins = parse_bins(sys.argv[1:])
    dep = Deployment(bins).start()
    try:
        for mode in ("all", "one"):
            run(bins, dep, mode)
    finally:
        dep.stop()


if __name__ == "__main__":
    main()
