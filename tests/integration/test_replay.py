#!/usr/bin/env python3
"""iotrace-replay end to end, onto a local directory: collector + agent on
loopback, tests/mpi/mpiio_mix (every MPI-IO family, POSIX I/O before
MPI_Init) and tests/mpi/known_io traced under `mpiexec -n 4`, each replayed
under `mpiexec -n 4` with the client library preloaded.  The replay's own
trace must have, per rank and function, the calls, bytes and offsets of the
original (shared-pointer accesses: the same offsets over all ranks, as
their order among ranks is a race), its files mapped under the target; a
wrong number of processes and a job with lost events are refused with
messages that say why.  Prints the figures docs/replay.md quotes."""
import collections
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Deployment, mpirun, parse_bins  # noqa: E402

NPROCS = 4
MESSAGES = {"MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Irecv"}
SHARED = {"MPI_File_write_shared", "MPI_File_read_shared", "MPI_File_write_ordered",
          "MPI_File_read_ordered", "MPI_File_iwrite_shared", "MPI_File_iread_shared"}


def fail(msg):
    raise AssertionError(msg)


def replayable(events, root):
    """MPI-IO calls, and POSIX calls outside MPI-IO on files under root."""
    out = []
    for e in events:
        if e["kind"] == "mpiio" and e["mpi_rank"] >= 0:
            out.append(e)
        elif (e["kind"] == "posix" and e["callid"] is None and e["mpi_rank"] >= 0
              and (e["file"] or "").startswith(root + "/")):
            out.append(e)
    return out


def profile(events, root):
    """(rank, kind, func) -> calls, bytes, sorted offsets (relative to root's files)."""
    calls = collections.Counter()
    nbytes = collections.Counter()
    offsets = collections.defaultdict(list)
    files = collections.defaultdict(set)
    for e in replayable(events, root):
        key = (e["mpi_rank"], e["kind"], e["func"])
        calls[key] += 1
        nbytes[key] += 0 if e["func"] in MESSAGES else e["bytes"]  # replayed empty
        okey = ("*", e["kind"], e["func"]) if e["func"] in SHARED else key
        offsets[okey].append(e["offset"])
        if e["file"]:
            files[key].add(os.path.relpath(e["file"], root))
    return calls, nbytes, {k: sorted(v) for k, v in offsets.items()}, files


def compare(orig, replay, orig_root, replay_root, what):
    oc, ob, oo, of = profile(orig, orig_root)
    rc, rb, ro, rf = profile(replay, replay_root)
    if oc != rc:
        diff = {k: (oc.get(k, 0), rc.get(k, 0)) for k in set(oc) | set(rc)
                if oc.get(k, 0) != rc.get(k, 0)}
        fail(f"{what}: calls per (rank, kind, function) differ (original, replay): {diff}")
    if ob != rb:
        fail(f"{what}: bytes differ: " + str({k: (ob[k], rb[k]) for k in ob if ob[k] != rb[k]}))
    if oo != ro:
        fail(f"{what}: offsets differ: " + str({k: (oo[k], ro.get(k)) for k in oo
                                               if oo[k] != ro.get(k)}))
    # POSIX files keep their names; the pre-MPI_Init files carry the pid.
    for k in of:
        if k[1] == "mpiio" and of[k] != rf[k]:
            fail(f"{what}: {k} on {of[k]} originally, replayed on {rf[k]}")
    return sum(oc.values())


def inner(events, root):
    """ROMIO's own POSIX I/O inside the MPI-IO calls, on root's files:
    (rank, MPI-IO function, POSIX function) -> calls, bytes, and offsets
    (relative to the file; not for shared-pointer calls, whose order among
    ranks is a race)."""
    func = {e["callid"]: e["func"] for e in events
            if e["kind"] == "mpiio" and e["role"] == "call"}
    calls, nbytes, offsets = collections.Counter(), collections.Counter(), {}
    for e in events:
        if (e["kind"] != "posix" or e["callid"] not in func or e["mpi_rank"] < 0
                or not (e["file"] or "").startswith(root + "/")):
            continue
        key = (e["mpi_rank"], func[e["callid"]], e["func"])
        calls[key] += 1
        nbytes[key] += e["bytes"]
        if func[e["callid"]] not in SHARED:
            offsets.setdefault(key, []).append(e["offset"])
    return calls, nbytes, {k: sorted(v) for k, v in offsets.items()}


def compare_inner(orig, replay, orig_root, replay_root, what):
    """The replayed calls make the same file-system calls as the original's:
    the same views, so the same pieces (and sieving and aggregation)."""
    o, r = inner(orig, orig_root), inner(replay, replay_root)
    for part, name in zip(range(3), ("calls", "bytes", "offsets")):
        if o[part] != r[part]:
            diff = {k: (o[part].get(k), r[part].get(k)) for k in set(o[part]) | set(r[part])
                    if o[part].get(k) != r[part].get(k)}
            fail(f"{what}: POSIX {name} inside MPI-IO calls differ (original, replay): "
                 f"{str(diff)[:1500]}")
    return sum(o[0].values())


def run_replay(bins, d, job, target, new_job, nprocs=NPROCS, extra=(), preload=True):
    # IOTRACE_SYNC: the replay's trace shows the barriers it replays, and
    # must not show those it adds itself (mpiio_mix's shared-pointer one).
    env = {"IOTRACE_JOB_ID": new_job, "IOTRACE_INCLUDE": target + "/*",
           "IOTRACE_AGENT": d.endpoint, "IOTRACE_SYNC": "1"}
    argv = [bins["replay"], "--store", d.store, "--job", job, "--target", target] + list(extra)
    return mpirun(bins, nprocs, argv, env, preload=preload, timeout=120)


def wait_job(d, job, count):
    return d.wait_for(lambda ev: sum(e["kind"] == "mpiio" for e in ev) >= count, job=job)


def job_names(d):
    out = subprocess.run([d.bins["export"], "--store", d.store, "--list-jobs"], check=True,
                         capture_output=True, text=True).stdout
    return {line.split()[0]: line for line in out.splitlines() if line.strip()}


def empty_dirs(top):
    """Directories under top with no file anywhere below them."""
    empty = set()
    for path, dirs, files in os.walk(top, topdown=False):
        if not files and all(os.path.join(path, x) in empty for x in dirs):
            empty.add(path)
    return sorted(os.path.relpath(p, top) for p in empty)


def check_job(bins, d, job, orig_root, mpi_calls, label):
    orig = wait_job(d, job, mpi_calls)
    target = os.path.join(d.tmp, "replay-" + job)
    new_job = "replay-" + job
    t0 = time.time()
    r = run_replay(bins, d, job, target, new_job, extra=["--json"])
    if r.returncode != 0:
        fail(f"replay of {job} failed ({r.returncode}): {r.stderr}\n{r.stdout}")
    report = json.loads(r.stdout)
    # Under the target only what the replay wrote: no directory of a file it
    # does not replay (the MPI runtime's /dev/shm, /proc, /sys), which
    # would be left there empty.
    empty = empty_dirs(target)
    if empty:
        fail(f"{label}: the replay made empty directories under the target: {sorted(empty)[:8]}")
    replay = wait_job(d, new_job, mpi_calls)
    time.sleep(0.5)
    replay = d.export(new_job)
    n = compare(orig, replay, orig_root, target, label)
    # known_io opens with hints (cb_nodes=1: rank 0 aggregates) and without
    # MPI_MODE_CREATE: both are in the trace and the replay opens the same
    # way, so ROMIO's own POSIX calls are alike for it too.
    n_inner = compare_inner(orig, replay, orig_root, target, label)
    opens = {(e["mpi_rank"], e["mpi_info"]) for e in orig if e["func"] == "MPI_File_open"}
    replayed_opens = {(e["mpi_rank"], e["mpi_info"]) for e in replay if e["func"] == "MPI_File_open"}
    if opens != replayed_opens:
        fail(f"{label}: opens' modes and hints {sorted(opens)}, replayed {sorted(replayed_opens)}")
    if label == "known_io" and not all(i and i.startswith("amode=RDWR;") and "cb_nodes=1" in i
                                       for _, i in opens):
        fail(f"{label}: opens' modes and hints as recorded: {sorted(opens)}")
    tot = report["total"]
    # mpiio_mix sets one strided view per rank (a vector of 4 blocks, resized).
    want_views = NPROCS if label == "mpiio_mix" else 0
    if tot.get("strided_views") != want_views:
        fail(f"{label}: {tot.get('strided_views')} views replayed with their pattern, "
             f"expected {want_views}")
    # Left out by design: calls that failed originally (fopen of files that
    # do not exist) and the MPI runtime's POSIX I/O (/dev/shm, /sys).
    missing = {k: v for k, v in tot["not_replayed"].items() if v and k not in ("failed", "outside")}
    if tot["failed"] or tot["added_seeks"] or missing:
        fail(f"{label}: replay report: {json.dumps(tot)[:800]}")
    # mpiio_mix's barrier between write_shared and the next seek_shared is
    # not in the trace: the replay adds one there on every rank, and none
    # in known_io, which has no shared-pointer calls.
    want_barriers = NPROCS if label == "mpiio_mix" else 0
    if tot.get("added_barriers") != want_barriers:
        fail(f"{label}: {tot.get('added_barriers')} barriers added, expected {want_barriers}")
    names = job_names(d)
    if f"name=replay-of:{job}" not in names.get(new_job, ""):
        fail(f"{label}: the replay's job does not name the original: {names.get(new_job)}")
    print(f"{label}: {n} calls replayed alike, with {n_inner} POSIX calls of ROMIO inside "
          f"them alike, {want_views} strided views, in {time.time() - t0:.1f} s; original "
          f"{tot['original_ns'] / 1e6:.1f} ms, replayed {tot['replayed_ns'] / 1e6:.1f} ms; "
          f"{want_barriers} barriers added")
    return report


def main():
    bins = parse_bins(sys.argv[1:])
    d = Deployment(bins).start()
    try:
        data = os.path.join(d.tmp, "data")
        os.makedirs(data)
        env = {"IOTRACE_AGENT": d.endpoint, "IOTRACE_JOB_ID": "mix",
               "MPIIO_MIX_PRE_INIT": os.path.join(data, "pre"), "MPIIO_MIX_NO_DIGEST": "1"}
        r = mpirun(bins, NPROCS, [bins["app"], os.path.join(data, "mix.dat")], env)
        if r.returncode != 0:
            fail(f"mpiio_mix failed: {r.stderr}")
        known = os.path.join(data, "known.dat")
        open(known, "w").close()
        # known_io reads its neighbour's blocks after a message from it and
        # an MPI_Barrier: recorded (IOTRACE_SYNC), the replay keeps that order.
        env = {"IOTRACE_AGENT": d.endpoint, "IOTRACE_JOB_ID": "known", "IOTRACE_SYNC": "1"}
        r = mpirun(bins, NPROCS, [bins["known_app"], known, "4096", "4"], env)
        if r.returncode != 0:
            fail(f"known_io failed: {r.stderr}")

        check_job(bins, d, "mix", data, NPROCS * 39, "mpiio_mix")
        rep = check_job(bins, d, "known", data, NPROCS * 17, "known_io")
        # The messages' rows: peer (xfer, the actual source of an
        # MPI_ANY_SOURCE receive) and tag (coll_seq), as known_io sends them.
        for e in d.export("known"):
            if e["func"] in MESSAGES:
                blocking = e["func"] in ("MPI_Send", "MPI_Recv")
                towards = 1 if e["func"] in ("MPI_Recv", "MPI_Isend") else -1
                want = ("sync", (e["mpi_rank"] + towards) % NPROCS, 7 if blocking else 8, 4)
                if (e["role"], e["xfer"], e["coll_seq"], e["bytes"]) != want:
                    fail(f"known_io: {e['func']} row {e}, want (role, xfer, coll_seq, bytes) {want}")
        for func in ("MPI_Barrier", "MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Irecv"):
            f = [f for f in rep["total"]["functions"] if f["func"] == func]
            if not f or f[0]["calls"] != NPROCS or f[0]["replayed_calls"] != NPROCS:
                fail(f"known_io: recorded {func} replayed: {f}")
        for f in rep["total"]["functions"]:
            print(f"  known_io {f['func']}: {f['calls']} calls, original "
                  f"{f['original_ns'] / 1e6:.3f} ms, replayed {f['replayed_ns'] / 1e6:.3f} ms")

        # The wrong number of processes: refused, naming the job's.
        r = run_replay(bins, d, "known", os.path.join(d.tmp, "wrong"), "wrong", nprocs=2,
                       preload=False)
        if r.returncode != 1 or "has 4 ranks" not in r.stderr:
            fail(f"-n 2 for a 4-rank job: exit {r.returncode}, {r.stderr!r}")

        # A job with lost events (batches handed over and never stored).
        p = subprocess.run([bins["producer"], "--agent", d.endpoint, "--job", "lossy",
                            "--rank", "0", "--batches", "6", "--events-per-batch", "64",
                            "--lose", "3"], capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            fail(f"iotrace-producer failed: {p.stderr}")
        d.wait_for(lambda ev: any(e["kind"] == "drop" for e in ev), job="lossy")
        r = run_replay(bins, d, "lossy", os.path.join(d.tmp, "lossy"), "lossy-replay", nprocs=1,
                       preload=False)
        lost = r"incomplete: \d+ events were lost \(rank 0: \d+ lost"
        if r.returncode != 1 or not re.search(lost, r.stderr):
            fail(f"lossy job: exit {r.returncode}, {r.stderr!r}")
        print("refused:", r.stderr.strip().splitlines()[-1][:300])
        r = run_replay(bins, d, "lossy", os.path.join(d.tmp, "lossy"), "lossy-replay", nprocs=1,
                       extra=["--allow-incomplete", "--compute", "skip"], preload=False)
        if r.returncode != 0 or "rank 0:" not in r.stdout:
            fail(f"lossy job with --allow-incomplete: exit {r.returncode}, {r.stderr!r}")
        print("2 passed, 0 failed")
    finally:
        d.stop()


if __name__ == "__main__":
    main()
