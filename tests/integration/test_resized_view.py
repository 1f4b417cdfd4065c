#!/usr/bin/env python3
"""Offsets under views of resized filetypes: tests/mpi/resized_view.c under
`mpiexec -n 2` with the library preloaded, three times, each run a job of
its own.  Right after MPI_File_set_view with the filetype of MPICH's
test/mpi/io/resized.c, and after seeking back to 0, ROMIO reports the
position as -1 and MPI_File_get_byte_offset of -1 answers MPI_SUCCESS
without writing its result: the library once recorded whatever its stack
held there, a different number in every run.  Every MPI_File_read and
MPI_File_write must be recorded at the byte offset the program worked out
from its data, or at -1 (not known), and the runs must record the same
offsets for every MPI-IO call.  The third run makes MPI_ERRORS_ARE_FATAL
the files' error handler: ROMIO raises the error of a byte offset asked
for -1 through it, which ended the program when the library asked."""
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import Deployment, mpirun, parse_bins  # noqa: E402

NPROCS = 2
ACCESSES = ("MPI_File_read", "MPI_File_write")


def fail(msg):
    raise AssertionError(msg)


def truth(stdout):
    """rank -> [(func, byte offset)] as the program printed them."""
    out = collections.defaultdict(list)
    for line in stdout.splitlines():
        words = line.split()
        if len(words) == 4 and words[0] == "access":
            out[int(words[1])].append((words[2], int(words[3])))
    return out


def traced(bins, dep, n, *mode):
    """rank -> [(func, offset)] of the run's MPI-IO calls on its file, and
    what the program printed."""
    job = f"resized-{n}"
    res = mpirun(bins, NPROCS, [bins["resized_app"], os.path.join(dep.tmp, f"data{n}"), *mode],
                 env={"IOTRACE_AGENT": dep.endpoint, "IOTRACE_JOB_ID": job})
    if res.returncode != 0:
        fail(f"run {n} {mode}: exit {res.returncode}\n{res.stderr}")
    want = truth(res.stdout)
    if sorted(want) != list(range(NPROCS)) or any(len(v) != 6 for v in want.values()):
        fail(f"run {n}: the program printed {dict(want)}")

    def complete(ev):
        return sum(e["func"] == "MPI_File_close" for e in ev) == NPROCS

    events = [e for e in dep.wait_for(complete, job=job) if e["kind"] == "mpiio" and e["file"]]
    calls = collections.defaultdict(list)
    for e in sorted(events, key=lambda e: int(e["callid"], 16)):
        calls[e["mpi_rank"]].append((e["func"], e["offset"]))
    for rank in range(NPROCS):
        got = [c for c in calls[rank] if c[0] in ACCESSES]
        if [f for f, _ in got] != [f for f, _ in want[rank]]:
            fail(f"run {n} rank {rank}: accesses {got}, the program made {want[rank]}")
        for (func, off), (_, byte) in zip(got, want[rank]):
            if off not in (byte, -1):
                fail(f"run {n} rank {rank}: {func} recorded at offset {off}, it started at "
                     f"byte {byte}; all: {got}")
    return calls, want


def main():
    bins = parse_bins(sys.argv[1:])
    dep = Deployment(bins).start()
    try:
        runs = [traced(bins, dep, 1), traced(bins, dep, 2), traced(bins, dep, 3, "fatal")]
        first = runs[0][0]
        for n, (calls, _) in enumerate(runs[1:], 2):
            if calls != first:
                fail(f"runs 1 and {n} recorded different offsets:\n{dict(first)}\n{dict(calls)}")
        got = [c for c in first[0] if c[0] in ACCESSES]
        print(f"ok: {NPROCS} ranks x 3 runs, (function, offset) recorded {got}, "
              f"the program's {runs[0][1][0]}")
    finally:
        dep.stop()


if __name__ == "__main__":
    main()
