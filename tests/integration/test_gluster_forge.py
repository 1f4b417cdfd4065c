#!/usr/bin/env python3
"""A storage client of an ordinary user's own cannot put disk operations
into another user's job.

A 1-brick distribute volume with both translators (volume.sh: root's FUSE
client connects from a privileged port), a real agent and collector. Root
runs bench_fuse_ops on the mount under a job of its own, and so does user
nobody (through root's FUSE client, as any user does): both are tagged with
their own jobs. Then nobody runs tests/server/gfapi_forge.c, libgfapi with a
graph of its own making: protocol/client straight to the brick and above it
tests/server/forge_tag_xlator.c, which tags each write with root's job, a
CallID of one of root's calls and iotrace.uid=0. Those writes must be
recorded in JOB~unverified, root's job must keep exactly the operations it
had, and the brick must say in its log that it did not trust the tags. A
job of root's own named DECOY~unverified keeps its operations too when
nobody's client tags DECOY: the unverified ones are given to no real user
and kept apart as DECOY~unverified~u4294967294."""
import glob
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from test_gluster import (FUSE_OPS, NOBODY, Volume, as_user, bench_tagged,  # noqa: E402
                          check_tags, disk_writes, fail, remove_registries, start_deployment,
                          user_file)

FORGED = 25


def xlator_type(path):
    """The volfile `type` that loads the module at path (without .so):
    GlusterFS dlopen()s "<translator dir>/<type>.so" (docs/gluster.md,
    *Loading from outside GlusterFS's directory*)."""
    posix = sorted(p for pattern in ("/usr/lib/*/glusterfs/*/xlator/storage/posix.so",
                                     "/usr/lib64/glusterfs/*/xlator/storage/posix.so",
                                     "/usr/lib/glusterfs/*/xlator/storage/posix.so")
                   for p in glob.glob(pattern))
    if not posix:
        fail("GlusterFS's translator directory not found")
    xl = os.path.realpath(os.path.dirname(os.path.dirname(posix[0])))
    up = "../" * len([c for c in xl.split("/") if c])
    return up + os.path.realpath(path)[1:].removesuffix(".so")


def brick_port(vol):
    for line in open(os.path.join(vol.dir, "vol", "client.vol")):
        words = line.split()
        if words[:2] == ["option", "remote-port"]:
            return int(words[2])
    fail("no remote-port in client.vol")


def disk_ops_of(dep, job):
    return [e for e in dep.export() if e["kind"] == "disk" and e["job"] == job]


def settled_ops(dep, job):
    """The job's disk operations once their number has stopped changing."""
    last, stable = None, 0
    deadline = time.time() + 60
    while time.time() < deadline:
        n = len(disk_ops_of(dep, job))
        stable = stable + 1 if n == last else 0
        if stable >= 3:
            return n
        last = n
        time.sleep(0.5)
    fail(f"disk operations of {job} did not settle\n{dep.logs()}")


def forge(bins, dep, vol, forger, job, callid, tag):
    """nobody's own client, its volfile, translator and log in forger:
    FORGED writes to a file of nobody's, tagged with job, callid and uid 0.
    Their events, once all are in the store."""
    if not os.path.isdir(forger):
        os.mkdir(forger, 0o700)
        shutil.copy(bins["forge_xlator"], forger)
    module = os.path.join(forger, os.path.basename(bins["forge_xlator"]))
    volfile = os.path.join(forger, f"forge-{tag}.vol")
    with open(volfile, "w") as f:
        f.write(f"""volume forge-client
    type protocol/client
    option transport-type tcp
    option transport.address-family inet
    option remote-host 127.0.0.1
    option remote-port {brick_port(vol)}
    option remote-subvolume iotrace-brick-0
end-volume

volume forge-tag
    type {xlator_type(module)}
    option job {job}
    option callid {callid:#x}
    option uid 0
    subvolumes forge-client
end-volume
""")
    for p in (forger, module, volfile):
        os.chown(p, NOBODY, NOBODY)
    _, brick_target = user_file(vol, NOBODY, tag)
    log = os.path.join(forger, f"gfapi-{tag}.log")
    res = as_user(NOBODY, [bins["gfapi_forge"], volfile, log, brick_target, str(FORGED)])
    if res.returncode != 0 or f"{FORGED} writes" not in res.stdout:
        text = open(log, errors="replace").read()[-3000:] if os.path.exists(log) else ""
        fail(f"gfapi_forge as nobody: exit {res.returncode}\n{res.stdout}{res.stderr}\n{text}")
    return disk_writes(dep, brick_target, FORGED)


def check_forged(forged, job, callid):
    wrong = [e for e in forged if e["job"] != job or int(e["callid"] or "0", 16) != callid]
    if wrong:
        fail(f"forged writes not recorded as {job} with their CallID: {wrong[:3]}")


def main():
    bins, dep = start_deployment(sys.argv[1:], "fuse_ops", "gfapi_forge", "forge_xlator")
    forger = os.path.join(dep.tmp, "forger")
    try:
        vol = Volume(bins, dep, "distribute", 1)
        try:
            os.chmod(dep.tmp, 0o711)  # nobody passes through to the mount
            n = 100 + FUSE_OPS
            jobs = {uid: f"forge-{uid}-{os.getpid()}" for uid in (0, NOBODY)}
            # A job of root's whose name is what an unverified tag of
            # another job of root's is recorded as.
            decoy = f"decoy-{os.getpid()}"
            jobs["decoy"] = decoy + "~unverified"
            root_writes = []
            for who, uid in ((0, 0), (NOBODY, NOBODY), ("decoy", 0)):
                path, brick_path = user_file(vol, uid, f"own-{who}")
                bench_tagged(bins, uid, dep, path, jobs[who])
                writes = disk_writes(dep, brick_path, n)
                check_tags(writes, jobs[who], f"uid {uid} through root's FUSE client")
                if who == 0:
                    root_writes = writes
            print(f"ok: root's and nobody's requests through root's FUSE client tagged with "
                  f"their own jobs ({n} writes each)")
            before = {j: settled_ops(dep, jobs[j]) for j in (0, "decoy")}

            callid = int(root_writes[0]["callid"], 16)
            forged = forge(bins, dep, vol, forger, jobs[0], callid, "forged")
            after = settled_ops(dep, jobs[0])
            into_root = [e for e in forged if e["job"] == jobs[0]]
            unverified = jobs[0] + "~unverified"
            print(f"root's job {jobs[0]}: {before[0]} disk operations before nobody's client, "
                  f"{after} after; nobody's {len(forged)} forged writes: "
                  f"{len(into_root)} in root's job, "
                  f"{sum(e['job'] == unverified for e in forged)} in {unverified}")
            if after != before[0] or into_root:
                fail(f"nobody's client put {after - before[0]} disk operations into root's job "
                     f"({before[0]} -> {after}): {into_root[:2]}")
            check_forged(forged, unverified, callid)
            brick_log = open(os.path.join(vol.dir, "log", "brick-0.log"), errors="replace").read()
            if "not trusted" not in brick_log:
                fail("the brick does not say that it did not trust the forged tags")
            print(f"ok: nobody's own gfapi client tagging root's job with iotrace.uid=0: "
                  f"{FORGED} writes stored as {unverified}, root's job keeps its "
                  f"{before[0]} disk operations")

            # Root named a job "JOB~unverified" first: unverified tags of JOB
            # are still no one's to join it.
            forged = forge(bins, dep, vol, forger, decoy, callid, "decoy")
            after = settled_ops(dep, jobs["decoy"])
            if after != before["decoy"]:
                fail(f"nobody's client put {after - before['decoy']} disk operations into root's "
                     f"job {jobs['decoy']} ({before['decoy']} -> {after})")
            check_forged(forged, jobs["decoy"] + "~u4294967294", callid)
            print(f"ok: root's own job {jobs['decoy']} keeps its {after} disk operations; "
                  f"nobody's {FORGED} unverified writes naming {decoy} kept apart as "
                  f"{jobs['decoy']}~u4294967294")
        finally:
            vol.stop()
    finally:
        dep.stop()
        remove_registries(dep)


if __name__ == "__main__":
    main()
