#!/usr/bin/env python3
"""CallIDs travel through GlusterFS: real glusterfsd bricks and a real FUSE
mount with the iotrace translators, real mpiexec ranks with the client
library, a real agent and collector.

On a 2-brick distribute, a replica-2 and a disperse 2+1 volume, mpiio_mix
writes and reads a file through the mount; from the export, every read and
write of that file on every brick must carry the CallID of an MPI-IO call of
the job whose byte range (a collective call's: its group's) covers the disk
operation's, and replica and disperse must show their fan-out. Then: on
the distribute volume, tests/mpi/nb_coll (non-blocking collectives completed
four at a time by one MPI_Waitall): the same for its disk operations, and
no call or disk operation unmatched in --stats; a
plain process writing to the mount (recorded, no CallID); two users at once
(root and nobody, bench_fuse_ops publishing CallIDs in each one's own
registry): each user's requests carry that user's job and CallIDs (and
nobody's requests naming root's job are kept apart as JOB~u65534); nobody's
registry truncated to 0 under the FUSE client (it keeps serving, requests
go untagged), then replaced (tagged again); a client mounted without
iotrace-client (recorded, no CallID), and the agent down (the bricks keep
serving, the program's results are unchanged). On each volume the
SLOG-2 export (slog2_export.py) must hold a state per event and an arrow per
call -> disk operation pair of the JSON Lines."""
import collections
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Deployment, mpirun, parse_bins  # noqa: E402
import slog2_export  # noqa: E402

NPROCS = 4
B = 65536                 # mpiio_mix block: one FUSE request each (limit 128 KiB)
EC_FRAGMENT = 512         # disperse 2+1: a 1024-byte stripe is two 512-byte fragments
EC_DATA_BRICKS = 2
STRIDED_REGION = 9        # mpiio_mix's strided view starts at region 9


def fail(msg):
    raise AssertionError(msg)


class Volume:
    def __init__(self, bins, dep, kind, bricks, extra=()):
        self.bins, self.dep, self.kind = bins, dep, kind
        self.dir = os.path.join(dep.tmp, "vol-" + kind)
        self.mnt = os.path.join(dep.tmp, "mnt-" + kind)
        args = [bins["volume_sh"], "start", "--type", kind, "--bricks", str(bricks),
                "--dir", self.dir, "--mount", self.mnt, "--xlator-dir", bins["xlator_dir"],
                "--agent", dep.endpoint, "--registry", dep.registry, "--fresh", *extra]
        env = dict(os.environ)
        if bins["preload_prefix"]:
            # The sanitizer build's translators need the ASan runtime loaded
            # first into glusterfsd and the FUSE client, which are not
            # instrumented; GlusterFS's own exit-time leaks are not ours.
            env["LD_PRELOAD"] = bins["preload_prefix"].rstrip(":")
            env["ASAN_OPTIONS"] = "detect_leaks=0"
        res = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
        if res.returncode != 0:
            fail(f"volume.sh start failed:\n{res.stdout}\n{res.stderr}")

    def stop(self):
        subprocess.run([self.bins["volume_sh"], "stop", "--dir", self.dir],
                       capture_output=True, text=True, timeout=120)


def run_mix(bins, dep, path, job, env_extra=None):
    # A GlusterFS 10 FUSE quirk turns direct I/O off for a file opened by
    # several processes while it is being created (docs/gluster.md), and the
    # kernel page cache would then answer reads: create it first.
    open(path, "wb").close()
    env = {"IOTRACE_AGENT": dep.endpoint, "IOTRACE_REGISTRY": dep.registry,
           "IOTRACE_JOB_ID": job, "MPIIO_MIX_NO_DIGEST": "1", **(env_extra or {})}
    res = mpirun(bins, NPROCS, [bins["app"], path, str(B)], env=env)
    if res.returncode != 0:
        fail(f"mpiexec failed ({res.returncode}): {res.stderr}")


def settled(dep, job, want_calls):
    """Events of the job once all calls are in and disk events stop coming."""
    last, stable = -1, 0
    deadline = time.time() + 60
    while time.time() < deadline:
        ev = dep.export()
        calls = sum(e["kind"] == "mpiio" and e["job"] == job for e in ev)
        if calls >= want_calls and len(ev) == last:
            stable += 1
            if stable >= 3:
                return ev
        else:
            stable = 0
        last = len(ev)
        time.sleep(0.4)
    fail(f"events of {job} did not settle\n{dep.logs()}")


def call_ranges(calls):
    """(job, CallID) -> (lo, hi) of the bytes its call (or collective group)
    may touch. Calls under mpiio_mix's strided view touch the whole strided
    region; collective calls stand for their group."""
    strided_lo = STRIDED_REGION * NPROCS * B

    def extent(e):
        if e["offset"] >= strided_lo:
            return strided_lo, strided_lo + NPROCS * B
        return e["offset"], e["offset"] + e["bytes"]

    own = {}
    groups = collections.defaultdict(list)
    for e in calls:
        if e["offset"] is None or e["offset"] < 0 or not e["bytes"]:
            continue
        key = (e["job"], e["callid"])
        lo, hi = extent(e)
        if key in own:
            lo, hi = min(lo, own[key][0]), max(hi, own[key][1])
        own[key] = (lo, hi)
        if e.get("coll_seq"):
            groups[(e["job"], e["file"], e["coll_seq"])].append(key)
    ranges = dict(own)
    for members in groups.values():
        lo = min(own[k][0] for k in members)
        hi = max(own[k][1] for k in members)
        for k in members:
            ranges[k] = (lo, hi)
    return ranges


def logical(kind, d):
    lo, hi = d["offset"], d["offset"] + max(d["bytes"], 1)
    if kind != "disperse":
        return lo, hi
    stripe = EC_FRAGMENT * EC_DATA_BRICKS
    return (lo // EC_FRAGMENT) * stripe, -(-hi // EC_FRAGMENT) * stripe


def check_volume(kind, events, job, data):
    calls = [e for e in events if e["kind"] == "mpiio" and e["job"] == job]
    ids = {(e["job"], e["callid"]) for e in calls}
    ranges = call_ranges(calls)
    disk = [e for e in events if e["kind"] == "disk" and e["file"] == "/" + os.path.basename(data)
            and e["func"] in ("readv", "writev")]
    if not disk:
        fail(f"{kind}: no disk reads or writes of {data} recorded")
    servers_per_call = collections.defaultdict(set)
    problems = []
    for d in disk:
        key = (d["job"], d["callid"])
        if d["callid"] is None:
            problems.append(f"without a CallID: {d}")
            continue
        if key not in ids:
            problems.append(f"CallID {d['callid']} of job {d['job']} names no MPI-IO call: {d}")
            continue
        lo, hi = logical(kind, d)
        if key in ranges:
            clo, chi = ranges[key]
            if kind == "disperse":
                stripe = EC_FRAGMENT * EC_DATA_BRICKS
                clo, chi = (clo // stripe) * stripe, -(-chi // stripe) * stripe
            if not (clo <= lo and hi <= chi):
                problems.append(f"disk range [{lo},{hi}) outside its call's [{clo},{chi}): {d}")
        if d["func"] == "writev":
            servers_per_call[key].add(d["server"])
    if problems:
        fail(f"{kind}: {len(problems)} of {len(disk)} disk reads/writes:\n" + "\n".join(problems[:20]))
    fanout = collections.Counter(len(s) for s in servers_per_call.values())
    want = {"distribute": 1, "replica": 2, "disperse": 3}[kind]
    if set(fanout) != {want}:
        fail(f"{kind}: bricks written per call {dict(fanout)}, expected {want} for every call")
    print(f"ok: {kind}: {len(disk)} disk reads/writes on "
          f"{len({d['server'] for d in disk})} bricks, all tagged with one of "
          f"{len(servers_per_call)} writing calls' CallIDs, {want} brick(s) per write call")


def check_untagged_writer(dep, vol):
    path = os.path.join(vol.mnt, "plain.txt")
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    os.write(fd, b"x" * 4096)
    os.close(fd)
    deadline = time.time() + 30
    while time.time() < deadline:
        mine = [e for e in dep.export() if e["kind"] == "disk" and e["file"] == "/plain.txt"
                and e["func"] == "writev"]
        if mine:
            if any(e["callid"] is not None or e["job"] is not None for e in mine):
                fail(f"a plain process's writes carry a CallID: {mine}")
            print(f"ok: a plain process's write is recorded on {mine[0]['server']} without a CallID")
            return
        time.sleep(0.3)
    fail("the plain process's write was not recorded")


# What each step of tests/server/fops_tagged.c should arrive as on the
# bricks (docs/gluster.md, the fop table): the operations' kinds, and the
# name under its directory, offset and length recorded, where they say more
# than -1 and 0.  copy_file_range(2) reaches them as reads and writes, which
# the kernel makes through the page cache.  "g" is a hard link to "f": the
# bricks name an inode by the first name they saw it by.
FOPS = {
    "create": ({"create"}, "f", -1, 0), "close": ({"flush"}, "f", -1, 0),
    "open": ({"open"}, "f", -1, 0), "pread": ({"readv"}, "f", 0, 4096),
    "fsync": ({"fsync"}, "f", -1, 0), "fdatasync": ({"fdatasync"}, "f", -1, 0),
    "ftruncate": ({"ftruncate"}, "f", 6000, 0), "fallocate": ({"fallocate"}, "f", 0, 16384),
    "punch_hole": ({"discard"}, "f", 0, 4096), "zero_range": ({"fallocate"}, "f", 4096, 4096),
    "fchmod": ({"setattr", "fsetattr"}, "f", -1, 0), "truncate": ({"truncate"}, "f", 100, 0),
    "chmod": ({"setattr"}, "f", -1, 0), "link": ({"link"}, "f", -1, 0),
    "rename": ({"rename"}, "f", -1, 0), "mkdir": ({"mkdir"}, "d", -1, 0),
    "rmdir": ({"rmdir"}, "d", -1, 0), "mkfifo": ({"mknod"}, "p", -1, 0),
    "copy_file_range": ({"copy_file_range", "readv", "writev"}, None, None, None),
}
PWRITES = [(0, 8192), (5000, 1000)]
UNLINKED = ["h", "p"]


def check_every_fop(bins, dep, vol):
    """Each kind of operation the translators record, tagged with the job and
    the CallID its thread published, with its name, offset and length."""
    job = f"fops-{os.getpid()}"
    top = f"/fops-{os.getpid()}"
    res = subprocess.run([bins["fops_tagged"], dep.registry, job, vol.mnt + top],
                         capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        fail(f"fops_tagged: exit {res.returncode}\n{res.stderr}")
    steps = [line.split() for line in res.stdout.splitlines()]
    callids = {c for c, _ in steps}
    deadline = time.time() + 30
    while True:
        # The whole store: the job is not in it until its first batch is.
        disk = [e for e in dep.export() if e["kind"] == "disk" and e["callid"] in callids]
        by_call = collections.defaultdict(list)
        for e in disk:
            by_call[e["callid"]].append(e)
        missing = []
        pwrites, unlinks = iter(PWRITES), iter(UNLINKED)
        for callid, step in steps:
            kinds, name, off, size = FOPS.get(step, ({"writev"}, "f", None, None))
            if step == "pwrite":
                off, size = next(pwrites)
            elif step == "unlink":
                kinds, name, off, size = {"unlink"}, next(unlinks), -1, 0
            want = [e for e in by_call.get(callid, []) if e["func"] in kinds
                    and (name is None or e["file"] == f"{top}/{name}")
                    and (off is None or (e["offset"], e["bytes"]) == (off, size))]
            if not want:
                missing.append((callid, step, by_call.get(callid, [])))
        if not missing:
            break
        if time.time() > deadline:
            fail(f"operations of fops_tagged not recorded as expected: (CallID, step, what was) "
                 f"{[(c, st, [(e['func'], e['file'], e['offset'], e['bytes']) for e in evs]) for c, st, evs in missing]}")
        time.sleep(0.5)
    wrong = [e for e in disk if e["job"] != job]
    if wrong:
        fail(f"fops_tagged's operations with another job: {wrong[:3]}")
    print(f"ok: {len(steps)} system calls of fops_tagged on the mount, {len(disk)} disk operations on "
          f"the bricks, each step with its CallID, kind, name, offset and length: "
          f"{sorted({e['func'] for e in disk})}")


NOBODY = 65534
FUSE_OPS = 5  # timed; bench_fuse_ops adds 100 untimed writes and reads


def as_user(uid, argv, **kw):
    if uid:
        argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
    # The sanitizer build's bench_fuse_ops leaks nothing; LSan as another user
    # would be the test's business, not the translator's.
    env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=0"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, **kw)


def user_file(vol, uid, tag):
    """A file on the mount that user uid may write (the volume root is root's)."""
    name = f"user-{uid}-{tag}.dat"
    path = os.path.join(vol.mnt, name)
    open(path, "wb").close()
    os.chown(path, uid, uid)
    return path, "/" + name


def bench_tagged(bins, uid, dep, path, job):
    res = as_user(uid, [bins["fuse_ops"], "-r", dep.registry, "-j", job, str(FUSE_OPS),
                        f"t:tag:{path}"])
    if res.returncode != 0:
        fail(f"bench_fuse_ops as uid {uid}: exit {res.returncode}\n{res.stderr}")


def disk_writes(dep, brick_path, want):
    deadline = time.time() + 30
    while time.time() < deadline:
        mine = [e for e in dep.export() if e["kind"] == "disk" and e["file"] == brick_path
                and e["func"] == "writev"]
        if len(mine) >= want:
            return mine
        time.sleep(0.3)
    fail(f"only {len(mine)} of {want} writes of {brick_path} recorded")


def check_tags(writes, job, what):
    wrong = [e for e in writes if e["job"] != job or not e["callid"]
             or not 1 <= int(e["callid"], 16) <= 2 * (100 + FUSE_OPS)]
    if wrong:
        fail(f"{what}: {len(wrong)} of {len(writes)} writes not tagged with {job}: {wrong[:3]}")


def check_users(bins, dep, vol):
    """Each user's requests are looked up in that user's registry; a user's
    truncated or replaced registry costs that user's tags only."""
    n = 100 + FUSE_OPS
    jobs = {}
    os.chmod(dep.tmp, 0o711)  # nobody passes through to the mount
    for uid in (0, NOBODY):
        path, brick_path = user_file(vol, uid, "a")
        jobs[uid] = f"user-{uid}-{os.getpid()}"
        bench_tagged(bins, uid, dep, path, jobs[uid])
        check_tags(disk_writes(dep, brick_path, n), jobs[uid], f"uid {uid}")
    reg = f"/dev/shm{dep.registry}-{NOBODY}"
    st = os.stat(reg)
    if st.st_uid != NOBODY or st.st_mode & 0o777 != 0o600:
        fail(f"nobody's registry {reg}: uid {st.st_uid} mode {st.st_mode & 0o777:o}")
    print(f"ok: root's and nobody's requests tagged from their own registries ({n} writes each)")

    # nobody names root's job: the tags say whose registry they came from
    # (iotrace.uid), and the readers keep nobody's disk operations apart.
    path, brick_path = user_file(vol, NOBODY, "x")
    bench_tagged(bins, NOBODY, dep, path, jobs[0])
    check_tags(disk_writes(dep, brick_path, n), f"{jobs[0]}~u{NOBODY}", "nobody naming root's job")
    print(f"ok: nobody's {n} writes naming root's job {jobs[0]} kept apart as {jobs[0]}~u{NOBODY}")

    # Truncated under the FUSE client, which has it open: lookups at once
    # and after the client has looked at the name again.
    os.truncate(reg, 0)
    for tag in ("b", "c"):
        path, brick_path = user_file(vol, NOBODY, tag)
        res = as_user(NOBODY, ["dd", "if=/dev/zero", f"of={path}", "bs=4096", "count=8",
                               "oflag=direct", "conv=notrunc"])
        if res.returncode != 0:
            fail(f"after nobody's registry was truncated, nobody's write failed: {res.stderr}")
        if any(e["callid"] is not None for e in disk_writes(dep, brick_path, 8)):
            fail("requests tagged from a truncated registry")
        time.sleep(1.2)
    with open(os.path.join(vol.mnt, "after-truncation.txt"), "w") as f:
        f.write("the FUSE client still serves everyone\n")
    print("ok: nobody's registry truncated to 0: the FUSE client kept serving, untagged")

    # Replaced: a new registry under the name is found within a second.
    os.unlink(reg)
    res = as_user(NOBODY, [bins["fuse_ops"], "-r", dep.registry, "0"])
    if res.returncode != 0 or not os.path.exists(reg):
        fail(f"bench_fuse_ops as nobody did not make a registry: {res.stderr}")
    time.sleep(1.2)
    path, brick_path = user_file(vol, NOBODY, "d")
    bench_tagged(bins, NOBODY, dep, path, jobs[NOBODY] + "-again")
    check_tags(disk_writes(dep, brick_path, n), jobs[NOBODY] + "-again", "replaced registry")
    print("ok: nobody's replaced registry found again: requests tagged")


def job_stats(dep, job):
    out = subprocess.run([dep.bins["export"], "--store", dep.store, "--job", job, "--stats",
                          "--format", "json"], check=True, capture_output=True).stdout
    return json.loads(out)["jobs"][0]


def check_posix_outside(bins, dep, vol, job):
    """IOTRACE_POSIX=outside leaves out the POSIX calls ROMIO makes for an
    MPI-IO call, not the tags of the disk operations it causes: they still
    name their calls, and pair with them as in the full trace."""
    job_o = job.replace("gluster-", "gluster-outside-", 1)
    data = os.path.join(vol.mnt, "data-outside.bin")
    run_mix(bins, dep, data, job_o, {"IOTRACE_POSIX": "outside"})
    events = settled(dep, job_o, 1)
    nested = [e for e in events if e["kind"] == "posix" and e["job"] == job_o and e["callid"]]
    if nested:
        fail(f"IOTRACE_POSIX=outside: {len(nested)} POSIX calls made for MPI-IO calls recorded")
    check_volume("distribute", events, job_o, data)
    full, outside = job_stats(dep, job), job_stats(dep, job_o)
    keys = ("unmatched_calls", "unmatched_disk_ops")
    if [full[k] for k in keys] != [outside[k] for k in keys]:
        fail(f"IOTRACE_POSIX=outside pairs calls and disk operations differently: "
             f"{[full[k] for k in keys]} in the full trace, {[outside[k] for k in keys]} here")
    print(f"ok: IOTRACE_POSIX=outside: no POSIX call made for an MPI-IO call recorded, "
          f"unmatched calls / disk operations {[outside[k] for k in keys]} as in the full trace")


def check_nb_collectives(bins, dep, vol):
    """tests/mpi/nb_coll: several non-blocking collectives completed by one
    MPI_Waitall, whose I/O ROMIO does inside it: every disk read and write
    names a call whose group covers it, and no call is left unmatched."""
    job = f"gluster-nb-{os.getpid()}"
    data = os.path.join(vol.mnt, "data-nb.bin")
    open(data, "wb").close()  # direct I/O stays on (run_mix)
    env = {"IOTRACE_AGENT": dep.endpoint, "IOTRACE_REGISTRY": dep.registry,
           "IOTRACE_JOB_ID": job, "NB_COLL_NO_DIGEST": "1"}
    res = mpirun(bins, NPROCS, [bins["nb_app"], data], env=env)
    if res.returncode != 0 or "nb_coll ok" not in res.stdout:
        fail(f"nb_coll failed ({res.returncode}): {res.stdout}{res.stderr}")
    events = settled(dep, job, 1)
    check_volume("distribute", events, job, data)
    stats = job_stats(dep, job)
    if stats["unmatched_calls"] or stats["unmatched_disk_ops"]:
        fail(f"nb_coll: unmatched calls {stats['unmatched_calls']}, disk operations "
             f"{stats['unmatched_disk_ops']}")
    print("ok: non-blocking collectives completed together: every disk operation within its "
          "call's group, no call or disk operation unmatched")


def remove_registries(dep):
    """The per-user registries the FUSE client made for root and nobody."""
    for uid in (os.geteuid(), NOBODY):
        try:
            os.unlink(f"/dev/shm{dep.registry}-{uid}")
        except OSError:
            pass


def start_deployment(argv, *needed):
    """The programs and a running collector and agent, with a registry name of
    the test's own, for a test on volumes; exit 77 without root or FUSE."""
    bins = parse_bins(argv)
    for k in ("volume_sh", "xlator_dir", *needed):
        if k not in bins:
            raise SystemExit(f"missing argument --{k.replace('_', '-')}")
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("skipped: needs root and /dev/fuse")
        sys.exit(77)
    dep = Deployment(bins).start()
    dep.registry = f"/iotrace-test-{os.getpid()}"
    return bins, dep


def main():
    bins, dep = start_deployment(sys.argv[1:], "fuse_ops", "fops_tagged", "nb_app")
    try:
        for kind, bricks in (("distribute", 2), ("replica", 2), ("disperse", 3)):
            vol = Volume(bins, dep, kind, bricks)
            try:
                job = f"gluster-{kind}-{os.getpid()}"
                data = os.path.join(vol.mnt, f"data-{kind}.bin")
                run_mix(bins, dep, data, job)
                events = settled(dep, job, 1)
                check_volume(kind, events, job, data)
                whole = slog2_export.check(bins["export"], dep.store,
                                           lambda: dep.export(job), job, dep.tmp,
                                           f"{kind} --slog2")
                if kind == "distribute":
                    slog2_export.check_options(bins["export"], dep.store, job, dep.tmp, whole)
                    check_untagged_writer(dep, vol)
                    check_users(bins, dep, vol)
                    check_posix_outside(bins, dep, vol, job)
                    check_nb_collectives(bins, dep, vol)
                if kind == "replica":
                    check_every_fop(bins, dep, vol)
            finally:
                vol.stop()

        vol = Volume(bins, dep, "distribute", 2, ["--no-client-hook"])
        try:
            job = f"gluster-nohook-{os.getpid()}"
            data = os.path.join(vol.mnt, "data-nohook.bin")
            run_mix(bins, dep, data, job)
            events = settled(dep, job, 1)
            disk = [e for e in events if e["kind"] == "disk" and e["file"] == "/data-nohook.bin"
                    and e["func"] in ("readv", "writev")]
            if not disk or any(e["callid"] is not None for e in disk):
                fail(f"without iotrace-client: want untagged disk operations, got {len(disk)}: "
                     f"{[e for e in disk if e['callid'] is not None][:3]}")
            print(f"ok: client without iotrace-client: {len(disk)} disk operations, none tagged")

            dep.agent.kill()
            dep.agent.wait()
            data2 = os.path.join(vol.mnt, "data-noagent.bin")
            start = time.time()
            run_mix(bins, dep, data2, job + "-noagent")
            size = os.path.getsize(data2)
            if size != 10 * NPROCS * B:
                fail(f"with the agent down the file has {size} bytes")
            print(f"ok: agent down: bricks kept serving, mpiio_mix verified its data "
                  f"({time.time() - start:.1f} s)")
        finally:
            vol.stop()
            dep.agent = None
    finally:
        dep.stop()
        remove_registries(dep)


if __name__ == "__main__":
    main()
