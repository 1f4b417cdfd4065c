#!/usr/bin/env python3
"""Ranks and the per-user CallID registry (docs/registry.md), with real
mpiexec ranks and the preloaded library:

- a registry under the user's name that belongs to another user, or that
  group or others may write, is refused: the ranks run on, their results
  unchanged, they say why (IOTRACE_VERBOSE) and write nothing into it; a
  registry of their own, made by the first rank, is 0600 and written;
- while ranks are inside MPI-IO calls in a loop, another user can neither
  truncate their registry nor open it for writing; the ranks end normally
  (no SIGBUS) and their file is the one an untraced run writes;
- a rank that makes MPI-IO calls from THREADS short-lived threads
  (MPI_THREAD_MULTIPLE, tests/mpi/thread_calls.c) frees each thread's slot
  when the thread ends: while it waits afterwards, the registry holds a
  slot or two of it, not one per thread that ever called, and every call
  is recorded.

Needs root (it plants registries of another owner and acts as nobody)."""
import os
import stat
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Deployment, mpirun, mpirun_cmd, parse_bins  # noqa: E402

NPROCS = 4
NOBODY = 65534
HEADER = 64
SLOT = 128
SLOTS = 8192
MAGIC, VERSION = 0x47455249, 1


def fail(msg):
    raise AssertionError(msg)


def plant(path, uid, mode):
    """A well-formed, empty registry owned by uid with the given mode."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IIII", MAGIC, VERSION, SLOTS, SLOT).ljust(HEADER, b"\0"))
        f.truncate(HEADER + SLOTS * SLOT)
    os.chown(path, uid, uid)
    os.chmod(path, mode)


def slots(path):
    """(tid, pid, callid, job) of every slot that was ever written."""
    data = open(path, "rb").read()
    out = []
    for off in range(HEADER, len(data) - SLOT + 1, SLOT):
        s = data[off:off + SLOT]
        if s.strip(b"\0"):
            tid, _seq, pid, _rank, callid = struct.unpack_from("<IIIiQ", s)
            out.append((tid, pid, callid, s[32:].split(b"\0")[0].decode(errors="replace")))
    return out


def as_nobody(*argv):
    return subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                           *argv], capture_output=True, text=True, timeout=30)


def run_mix(bins, dep, name, env, preload=True):
    path = os.path.join(dep.tmp, name + ".bin")
    res = mpirun(bins, NPROCS, [bins["app"], path, "65536"], env=env, preload=preload)
    if res.returncode != 0:
        fail(f"{name}: exit {res.returncode}\n{res.stderr}")
    return res.stdout.replace(path, "FILE"), res.stderr


def check_refused(bins, dep, env, reg, base_out, uid, mode, why):
    plant(reg, uid, mode)
    out, err = run_mix(bins, dep, f"refused-{uid}-{mode:o}", {**env, "IOTRACE_VERBOSE": "1"})
    if out != base_out:
        fail(f"uid {uid} mode {mode:o}: output differs from the untraced run:\n{out}\n{base_out}")
    said = [line for line in err.splitlines() if "CallIDs are not published" in line]
    if len(said) != NPROCS or not all(why in line for line in said):
        fail(f"uid {uid} mode {mode:o}: want one '{why}' per rank, got:\n{err}")
    if slots(reg):
        fail(f"uid {uid} mode {mode:o}: ranks wrote into a registry they refused: {slots(reg)[:3]}")
    st = os.stat(reg)
    if st.st_uid != uid or stat.S_IMODE(st.st_mode) != mode:
        fail(f"the refused registry was changed: uid {st.st_uid} mode {st.st_mode:o}")
    print(f"ok: registry of uid {uid}, mode {mode:o} refused ({why}); output unchanged")
    os.unlink(reg)


def check_own(bins, dep, env, reg, base_out):
    out, _ = run_mix(bins, dep, "own", env)
    if out != base_out:
        fail("with its own registry the output differs from the untraced run")
    st = os.stat(reg)
    if st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) != 0o600:
        fail(f"the ranks' registry is uid {st.st_uid} mode {st.st_mode:o}, want 0600")
    if not any(job for _t, _p, _c, job in slots(reg)):
        fail("the ranks did not write into their own registry")
    print(f"ok: own registry made 0600 by the first rank and written ({len(slots(reg))} slots)")


def check_loop_survives(bins, dep, env, reg):
    """Another user goes for the registry while the ranks are in MPI-IO
    calls; with a registry others may write (the old mode 0666), the
    truncation succeeds and the ranks die of SIGBUS."""
    B = "4096"
    ref = os.path.join(dep.tmp, "loop-plain.bin")
    stop = os.path.join(dep.tmp, "stop")
    open(stop, "w").close()
    res = mpirun(bins, NPROCS, [bins["loop_app"], ref, B, stop], preload=False)
    if res.returncode != 0:
        fail(f"untraced mpiio_loop: exit {res.returncode}\n{res.stderr}")
    ref_out = res.stdout
    os.unlink(stop)

    data = os.path.join(dep.tmp, "loop-traced.bin")
    job = subprocess.Popen(mpirun_cmd(bins, NPROCS, [bins["loop_app"], data, B, stop], env=env),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        while not (os.path.exists(reg) and any(c for _t, _p, c, _j in slots(reg))):
            if time.time() > deadline or job.poll() is not None:
                fail("the ranks never showed a running MPI-IO call in their registry")
            time.sleep(0.01)
        size = os.path.getsize(reg)
        attempts = {
            "truncate": as_nobody("truncate", "-s", "0", reg),
            "open for writing": as_nobody("sh", "-c", f'exec 3<>"{reg}"'),
            "replace": as_nobody("sh", "-c", f'rm -f "{reg}" && : > "{reg}"'),
        }
        for what, res in attempts.items():
            if res.returncode == 0:
                fail(f"another user could {what} the registry")
        if os.path.getsize(reg) != size:
            fail(f"the registry changed size: {os.path.getsize(reg)} of {size} bytes")
        time.sleep(0.5)  # the ranks go on in their loop for a while
    finally:
        open(stop, "w").close()
        out, err = job.communicate(timeout=120)
    if job.returncode != 0 or "Bus error" in err or "SIGBUS" in err:
        fail(f"traced mpiio_loop: exit {job.returncode} (mpiexec gives 7 for SIGBUS)\n{err}")
    if out != ref_out or open(data, "rb").read() != open(ref, "rb").read():
        fail("traced mpiio_loop's output or file differs from the untraced run's")
    print(f"ok: another user could not {', '.join(attempts)} the registry of ranks in MPI-IO "
          "calls; they ended normally, their file as untraced")


THREADS = 300


def check_thread_exit(bins, dep, env, reg):
    job = f"threads-{os.getpid()}"
    path = os.path.join(dep.tmp, "threads.bin")
    p = subprocess.Popen(mpirun_cmd(bins, 1, [bins["thread_app"], path, str(THREADS)],
                                    {**env, "IOTRACE_JOB_ID": job}),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        line = p.stdout.readline()
        if not line.startswith("waiting "):
            fail(f"thread_calls: {line!r} {p.stderr.read() if p.poll() is not None else ''}")
        pid = int(line.split()[1])
        held = [tid for tid, spid, _c, _j in slots(reg) if tid and spid == pid]
        p.stdin.write("\n")
        p.stdin.flush()
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    if p.returncode != 0:
        fail(f"thread_calls: exit {p.returncode}\n{err}")
    if not 1 <= len(held) <= 3:
        fail(f"after {THREADS} threads that made an MPI-IO call each and ended, the registry "
             f"holds {len(held)} slots of the process (tids {held[:8]}...)")
    events = dep.wait_for(lambda ev: sum(e["func"] == "MPI_File_write_at" for e in ev) >= THREADS,
                          job=job)
    writes = [e for e in events if e["func"] == "MPI_File_write_at"]
    if len(writes) != THREADS or len({e["tid"] for e in writes}) < THREADS * 0.9 or \
            any(e["ret"] != 0 or e["bytes"] != 8 for e in writes):
        fail(f"{len(writes)} MPI_File_write_at recorded from "
             f"{len({e['tid'] for e in writes})} threads, want {THREADS}")
    print(f"ok: {THREADS} threads made an MPI-IO call each and ended; afterwards the registry "
          f"held {len(held)} slot(s) of the process; {len(writes)} calls recorded from "
          f"{len({e['tid'] for e in writes})} threads")


def main():
    bins = parse_bins(sys.argv[1:])
    for k in ("loop_app", "thread_app"):
        if k not in bins:
            raise SystemExit(f"missing argument --{k.replace('_', '-')}")
    if os.geteuid() != 0:
        print("skipped: needs root")
        sys.exit(77)
    dep = Deployment(bins).start()
    base = f"/iotrace-regtest-{os.getpid()}"
    reg = f"/dev/shm{base}-{os.geteuid()}"
    env = {"IOTRACE_AGENT": dep.endpoint, "IOTRACE_REGISTRY": base}
    try:
        base_out, _ = run_mix(bins, dep, "plain", {}, preload=False)
        check_refused(bins, dep, env, reg, base_out, NOBODY, 0o600, "belongs to uid 65534")
        check_refused(bins, dep, env, reg, base_out, 0, 0o620, "may be written by other users")
        check_refused(bins, dep, env, reg, base_out, 0, 0o606, "may be written by other users")
        check_own(bins, dep, env, reg, base_out)
        os.unlink(reg)
        check_loop_survives(bins, dep, env, reg)
        check_thread_exit(bins, dep, env, reg)
    finally:
        dep.stop()
        if os.path.exists(reg):
            os.unlink(reg)


if __name__ == "__main__":
    main()
