#!/usr/bin/env python3
"""Every POSIX and stdio wrapper, offsets tracked without system calls, and
fork: the child is a producer of its own and the parent keeps tracing."""
import collections
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import Deployment, parse_bins, sanitizer_env  # noqa: E402

# (func, offset, bytes) of one io_round, in order, on the .dat file
ROUND = [("open", -1, 0), ("write", 0, 10), ("write", 10, 6), ("pwrite", 100, 8),
         ("pread", 100, 8), ("lseek", 200, 0), ("writev", 200, 32), ("pwritev", 300, 32),
         ("preadv", 300, 32), ("pwritev2", 400, 32), ("preadv2", 400, 32), ("lseek", 0, 0),
         ("read", 0, 16), ("readv", 16, 32), ("fsync", -1, 0), ("fdatasync", -1, 0),
         ("ftruncate", 1000, 0), ("close", -1, 0), ("fopen", -1, 0), ("fwrite", -1, 20),
         ("fread", -1, 20), ("fclose", -1, 0)]


def main():
    bins = parse_bins(sys.argv[1:])
    dep = Deployment(bins).start()
    try:
        env = dict(os.environ, LD_PRELOAD=bins["preload_prefix"] + bins["client"],
                   IOTRACE_AGENT=dep.endpoint, IOTRACE_JOB_ID="posix-test", **sanitizer_env(bins))
        res = subprocess.run([bins["posix_app"], dep.tmp], env=env, capture_output=True, text=True,
                             timeout=60)
        assert res.returncode == 0 and "child exit 0" in res.stdout, res
        parent = os.path.join(dep.tmp, "parent.dat")
        child = os.path.join(dep.tmp, "child.dat")

        def complete(ev):
            n = collections.Counter(e["file"] for e in ev if e["kind"] == "posix")
            return n[parent] >= 2 * len(ROUND) and n[child] >= len(ROUND)

        events = dep.wait_for(complete, job="posix-test")
        posix = [e for e in events if e["kind"] == "posix"]
        pids = {f: {e["pid"] for e in posix if e["file"] == f} for f in (parent, child)}
        assert len(pids[parent]) == 1 and len(pids[child]) == 1 and pids[parent] != pids[child], pids
        for path, rounds in ((parent, 2), (child, 1)):
            got = [(e["func"], e["offset"], e["bytes"]) for e in posix if e["file"] == path]
            if got != ROUND * rounds:
                raise AssertionError(f"{path}:\n got {got}\nwant {ROUND * rounds}")
            for e in posix:
                if e["file"] == path and e["callid"] is not None:
                    raise AssertionError(f"{e} outside MPI-IO carries a CallID")
        creat = [e["func"] for e in posix if e["file"] and e["file"].endswith(".creat")]
        assert creat.count("creat") == 3 and creat.count("openat") == 3, creat
        print(f"ok: {len(posix)} POSIX events, parent and forked child traced")
    finally:
        dep.stop()


if __name__ == "__main__":
    main()
