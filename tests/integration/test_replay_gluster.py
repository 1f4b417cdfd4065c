#!/usr/bin/env python3
"""iotrace-replay from one GlusterFS volume onto others: tests/mpi/mpiio_mix
and tests/mpi/known_io traced on a distribute volume, then each replayed,
traced again, onto a replica and a disperse volume.  Every replay's trace
has the original's calls, bytes and offsets per rank and function; the
disk operations per call of the two runs come side by side from --stats
(the figures of docs/replay.md's worked example)."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import mpirun  # noqa: E402
from test_gluster import NPROCS, B, Volume, run_mix, settled, start_deployment  # noqa: E402
from test_replay import compare  # noqa: E402

MIX_CALLS, KNOWN_CALLS = NPROCS * 39, NPROCS * 12
KNOWN_BLOCK, KNOWN_BLOCKS = 65536, 4


def fail(msg):
    raise AssertionError(msg)


def stats(dep, job):
    out = subprocess.run([dep.bins["export"], "--store", dep.store, "--job", job, "--stats",
                          "--format", "json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["jobs"][0]


def summary(dep, job):
    """The figures of one run: time span, amplification, and per data function
    the calls, their summed time and disk operations per call."""
    s = stats(dep, job)
    rows = {}
    for name, f in s["functions"].items():
        if f["disk_ops_per_call"]["mean"] is not None and f["bytes"]:
            rows[name] = (f["count"], f["time_ns"] / 1e6, f["disk_ops_per_call"]["mean"])
    span = (s["time_span"] or {}).get("duration_ns", 0) / 1e6
    return span, s["amplification"], rows, len(s["servers"])


def replay(bins, dep, job, target, new_job):
    env = {"IOTRACE_AGENT": dep.endpoint, "IOTRACE_REGISTRY": dep.registry,
           "IOTRACE_JOB_ID": new_job, "IOTRACE_INCLUDE": target + "/*"}
    r = mpirun(bins, NPROCS, [bins["replay"], "--store", dep.store, "--job", job, "--target",
                              target, "--json"], env, timeout=120)
    if r.returncode != 0:
        fail(f"replay of {job} onto {target} failed ({r.returncode}): {r.stderr}\n{r.stdout}")
    return json.loads(r.stdout)


def show(label, dep, job):
    span, amp, rows, servers = summary(dep, job)
    print(f"  {label}: span {span:.1f} ms, amplification {amp}, {servers} bricks with its "
          f"disk operations")
    for name in sorted(rows):
        n, ms, per = rows[name]
        print(f"    {name:32s} {n:4d} calls {ms:9.2f} ms  {per:5.2f} disk ops/call")


def volume(bins, dep, kind, bricks):
    # IOTRACE_TEST_BASE_PORT keeps a developer's bricks off the ports a CI run
    # may be using at the same time.
    port = os.environ.get("IOTRACE_TEST_BASE_PORT")
    return Volume(bins, dep, kind, bricks, ["--base-port", port] if port else [])


def main():
    bins, dep = start_deployment(sys.argv[1:], "replay", "known_app")
    pid = os.getpid()
    jobs = {"mix": (f"rg-mix-{pid}", MIX_CALLS), "known": (f"rg-known-{pid}", KNOWN_CALLS)}
    try:
        vol = volume(bins, dep, "distribute", 2)
        orig_root = vol.mnt
        try:
            run_mix(bins, dep, os.path.join(vol.mnt, "mix.bin"), jobs["mix"][0])
            known = os.path.join(vol.mnt, "known.bin")
            open(known, "wb").close()
            env = {"IOTRACE_AGENT": dep.endpoint, "IOTRACE_REGISTRY": dep.registry,
                   "IOTRACE_JOB_ID": jobs["known"][0]}
            r = mpirun(bins, NPROCS, [bins["known_app"], known, str(KNOWN_BLOCK),
                                      str(KNOWN_BLOCKS)], env)
            if r.returncode != 0:
                fail(f"known_io failed: {r.stderr}")
            orig = {k: settled(dep, job, n) for k, (job, n) in jobs.items()}
        finally:
            vol.stop()
        for key, (job, _) in jobs.items():
            show(f"{key} on distribute (original)", dep, job)
        for kind, bricks in (("replica", 2), ("disperse", 3)):
            vol = volume(bins, dep, kind, bricks)
            try:
                for key, (job, n) in jobs.items():
                    target = os.path.join(vol.mnt, key)
                    new_job = f"{job}-on-{kind}"
                    rep = replay(bins, dep, job, target, new_job)
                    events = settled(dep, new_job, n)
                    mine = [e for e in orig[key] if e["job"] == job]
                    calls = compare(mine, [e for e in events if e["job"] == new_job],
                                    orig_root, target, f"{key} onto {kind}")
                    tot = rep["total"]
                    if tot["failed"] or tot["added_seeks"]:
                        fail(f"{key} onto {kind}: {json.dumps(tot)[:600]}")
                    print(f"ok: {key} replayed onto {kind}: {calls} calls alike; replay "
                          f"{tot['replayed_ns'] / 1e6:.1f} ms against "
                          f"{tot['original_ns'] / 1e6:.1f} ms")
                    show(f"{key} on {kind} (replay)", dep, new_job)
                    _, amp, rows, _ = summary(dep, new_job)
                    # Replica 2 writes twice what is asked, reads it once.
                    if kind == "replica" and key == "known" and not (amp or 0) > 1.2:
                        fail(f"known_io on replica 2: amplification {amp}")
            finally:
                vol.stop()
        print("2 passed, 0 failed")
    finally:
        dep.stop()


if __name__ == "__main__":
    main()
