#!/usr/bin/env python3
"""Hydra gives a rank no job id: the library agrees on one in MPI_Init. I/O
done before MPI_Init is sent before the id is known and must still be
exported, listed and filtered under that job.  The program waits 300 ms
between that I/O and MPI_Init, so that the library sends it (every 50 ms)
before the job id exists: readers hold such events until the process names
its job."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import Deployment, mpirun, parse_bins  # noqa: E402

NPROCS = 2


def main():
    bins = parse_bins(sys.argv[1:])
    dep = Deployment(bins).start()
    try:
        pre = os.path.join(dep.tmp, "pre-init")
        env = {"IOTRACE_AGENT": dep.endpoint, "MPIIO_MIX_PRE_INIT": pre,
               "MPIIO_MIX_PRE_INIT_WAIT_MS": "300"}
        env_clean = {k: v for k, v in os.environ.items()
                     if not k.startswith(("IOTRACE_JOB_ID", "SLURM_JOB_ID", "PBS_JOBID"))}
        os.environ.clear()
        os.environ.update(env_clean)
        res = mpirun(bins, NPROCS, [bins["app"], os.path.join(dep.tmp, "data.bin"), "512"], env=env)
        assert res.returncode == 0, res.stderr

        def complete(ev):
            closes = [e for e in ev if e["kind"] == "mpiio" and e["func"] == "MPI_File_close"]
            pre_io = [e for e in ev if e["kind"] == "posix" and (e["file"] or "").startswith(pre)]
            return len(closes) == NPROCS and len(pre_io) >= 3 * NPROCS

        events = dep.wait_for(complete)
        jobs = {e["job"] for e in events if e["kind"] in ("mpiio", "posix")}
        assert len(jobs) == 1 and None not in jobs and "" not in jobs, f"jobs seen: {jobs}"
        job = jobs.pop()

        listed = subprocess.run([bins["export"], "--store", dep.store, "--list-jobs"],
                                check=True, capture_output=True, text=True).stdout.splitlines()
        assert len(listed) == 1 and listed[0].startswith(job + " ranks=2 "), listed
        total = int(listed[0].split("events=")[1].split()[0])

        mine = dep.export(job)
        pre_io = [e for e in mine if e["kind"] == "posix" and (e["file"] or "").startswith(pre)]
        funcs = sorted(e["func"] for e in pre_io)
        assert funcs == sorted(["open", "write", "close"] * NPROCS), funcs
        assert {e["mpi_rank"] for e in pre_io} == set(range(NPROCS)), pre_io
        assert all(e["callid"] is None for e in pre_io), pre_io
        assert len([e for e in mine if e["kind"] != "drop"]) == total, (len(mine), total)
        print(f"ok: job {job} agreed in MPI_Init covers {len(pre_io)} POSIX events made before it, "
              f"{total} events in all")
    finally:
        dep.stop()


if __name__ == "__main__":
    main()
