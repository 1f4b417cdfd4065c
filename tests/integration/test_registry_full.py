#!/usr/bin/env python3
"""Ranks and a CallID registry on a full tmpfs (docs/registry.md). Any user
can fill /dev/shm, and a page of a shared mapping that has no storage yet
then raises SIGBUS in whoever touches it first. With IOTRACE_REGISTRY on a
small tmpfs of the test's own (mounted in a private mount namespace, so
that it goes away with the test whatever happens), real mpiexec ranks with
the preloaded library

- find a sparse registry, as an older iotrace made them, on the full tmpfs:
  they refuse it, say why once each (IOTRACE_VERBOSE), write nothing into
  it, end with the output of an untraced run, and their calls are recorded;
- find room for a registry's header but not for its table: none is made,
  nothing is left under the name, and they run on likewise;
- made their registry while there was room: once the tmpfs has filled up,
  the ranks of a later job publish in it as before.

Before registries were reserved, the ranks of the first two cases and of
the later job of the third died of SIGBUS (mpiexec exit 7).

Needs root and a mount namespace of its own (exit 77 without)."""
import ctypes
import errno
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from harness import Deployment, parse_bins  # noqa: E402
from test_registry import NPROCS, fail, plant, run_mix, slots  # noqa: E402

CLONE_NEWNS = 0x00020000
MS_REC, MS_PRIVATE = 0x4000, 1 << 18
PAGE = os.sysconf("SC_PAGE_SIZE")
NO_SPACE = os.strerror(errno.ENOSPC)


def private_mounts():
    """Moves this process into a mount namespace of its own, one whose
    mounts no other process sees and which ends with this process and its
    children. Python has no os.unshare before 3.12."""
    libc = ctypes.CDLL(None, use_errno=True)
    return (libc.unshare(CLONE_NEWNS) == 0 and
            libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) == 0)


def fill(directory, leave_pages=0):
    """Writes a file into the tmpfs until it is full, then frees
    leave_pages pages of it again."""
    fd = os.open(os.path.join(directory, "fill"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    n = 0
    try:
        while True:
            n += os.write(fd, b"\1" * PAGE)
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
    os.ftruncate(fd, n - leave_pages * PAGE)
    os.close(fd)
    free = os.statvfs(directory).f_bfree
    if free > leave_pages:
        fail(f"the tmpfs has {free} free pages after filling it, want {leave_pages}")


def unfill(directory):
    os.unlink(os.path.join(directory, "fill"))


def traced_run(run, name):
    """A traced mpiio_mix run that must end as the untraced one did, its
    calls recorded: its 'CallIDs are not published' lines, and its job."""
    bins, dep, env, base_out = run
    job = f"{name}-{os.getpid()}"
    out, err = run_mix(bins, dep, name, {**env, "IOTRACE_JOB_ID": job})
    if out != base_out:
        fail(f"{name}: output differs from the untraced run:\n{out}\n{base_out}")
    dep.wait_for(lambda ev: sum(e.get("func") == "MPI_File_open" for e in ev) >= NPROCS, job=job)
    return [line for line in err.splitlines() if "CallIDs are not published" in line], job


def check_sparse_refused(run, small, reg):
    plant(reg, os.geteuid(), 0o600)
    fill(small)
    before = open(reg, "rb").read()
    said, _ = traced_run(run, "sparse")
    want = f"cannot reserve registry {reg}: {NO_SPACE}"
    if len(said) != NPROCS or not all(want in line for line in said):
        fail(f"sparse registry on a full tmpfs: want one '{want}' per rank, got:\n" +
             "\n".join(said))
    if open(reg, "rb").read() != before:
        fail("the ranks wrote into a sparse registry they refused")
    print(f"ok: a sparse registry on a full tmpfs refused by {NPROCS} ranks ({want}); "
          "output unchanged, calls recorded")
    os.unlink(reg)
    unfill(small)


def check_no_room(run, small, reg):
    fill(small, leave_pages=2)
    said, _ = traced_run(run, "noroom")
    # The first rank fails to reserve the registry it creates and removes
    # it; the others may have found it meanwhile and refuse it half-made.
    if len(said) != NPROCS or not any(f"cannot reserve registry {reg}" in line for line in said):
        fail("no room for a registry's table: want a 'cannot reserve registry' among one "
             "'CallIDs are not published' per rank, got:\n" + "\n".join(said))
    if os.path.exists(reg):
        fail("a registry that could not be reserved was left behind")
    print("ok: with room for a header but not a table no registry was made; output unchanged, "
          "calls recorded")
    unfill(small)


def check_made_then_full(run, small, reg):
    said, _ = traced_run(run, "room")
    if said or not os.path.exists(reg):
        fail("with room on the tmpfs the ranks did not make their registry:\n" + "\n".join(said))
    fill(small)
    said, job = traced_run(run, "later")
    if said:
        fail("a registry made with room refused once the tmpfs is full:\n" + "\n".join(said))
    if sum(j == job for _t, _p, _c, j in slots(reg)) < NPROCS:
        fail(f"the later job's ranks did not publish in their registry: {slots(reg)[:8]}")
    print("ok: ranks made their registry while there was room; on the full tmpfs the ranks of "
          "a later job published in it")
    unfill(small)


def main():
    bins = parse_bins(sys.argv[1:])
    if os.geteuid() != 0:
        print("skipped: needs root")
        sys.exit(77)
    if not private_mounts():
        print(f"skipped: no mount namespace of its own: {os.strerror(ctypes.get_errno())}")
        sys.exit(77)
    small = tempfile.mkdtemp(prefix="iotrace-small-tmpfs-")
    # 2 MiB: room for one registry (1 MiB and a page) and some.
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "iotrace-test",
                          small], capture_output=True, text=True)
    if res.returncode != 0:
        os.rmdir(small)
        print(f"skipped: cannot mount a tmpfs: {res.stderr.strip()}")
        sys.exit(77)
    dep = None
    try:
        dep = Deployment(bins).start()
        base = os.path.join(small, "registry")
        reg = f"{base}-{os.geteuid()}"
        env = {"IOTRACE_AGENT": dep.endpoint, "IOTRACE_REGISTRY": base, "IOTRACE_VERBOSE": "1"}
        base_out, _ = run_mix(bins, dep, "plain", {}, preload=False)
        run = (bins, dep, env, base_out)
        check_sparse_refused(run, small, reg)
        check_no_room(run, small, reg)
        check_made_then_full(run, small, reg)
    finally:
        if dep:
            dep.stop()
        subprocess.run(["umount", small], check=False)
        os.rmdir(small)


if __name__ == "__main__":
    main()
