#!/usr/bin/env python3
"""Ranks of any local user reach an agent run by root, and the agent says
who sent each batch: its ipc socket is open to every user (0666), every
batch is stamped with the sender's uid, gid and pid from the kernel
(SO_PEERCRED), and a batch that names a sender itself is refused. A user
who names another user's job gets a job of their own ("JOB~uUID"), never
events in the other's; their batches cannot take the other's sequence
numbers either (the producer key includes the uid)."""
import collections
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import check, failures, free_port  # noqa: E402

COLLECTOR, AGENT, PRODUCER, EXPORT = sys.argv[1:5]
NOBODY = 65534


def as_nobody(cmd):
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] + cmd


def main():
    if os.geteuid() != 0:
        print("skipped: needs root to run producers as another user")
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="iotrace-users-")
    os.chmod(tmp, 0o755)
    port = free_port()
    store, sock = os.path.join(tmp, "store"), os.path.join(tmp, "run", "agent.sock")
    log = open(os.path.join(tmp, "daemons.log"), "wb")
    c = subprocess.Popen([COLLECTOR, "--listen", f"tcp://127.0.0.1:{port}", "--store", store,
                          "--http", "off"], stderr=log)
    a = subprocess.Popen([AGENT, "--collector", f"tcp://127.0.0.1:{port}", "--listen", "ipc://" + sock,
                          "--node", "n1", "--state-dir", "none", "--stats-interval", "0.2s"], stderr=log)
    try:
        deadline = time.time() + 10
        while not os.path.exists(sock) and time.time() < deadline:
            time.sleep(0.05)
        check(os.stat(sock).st_mode & 0o777 == 0o666, "socket mode %o" % (os.stat(sock).st_mode & 0o777))

        def produce(job, batches, user, *extra):
            cmd = [PRODUCER, "--agent", "ipc://" + sock, "--node", "n1", "--job", job, "--rank", "0",
                   "--batches", str(batches), "--events-per-batch", "10"] + list(extra)
            r = subprocess.run(as_nobody(cmd) if user else cmd, capture_output=True, text=True)
            check(r.returncode == 0, f"producer {job} as {user or 'root'}: {r.stderr}")

        produce("shared", 5, None)
        produce("shared", 4, "nobody")
        produce("mine", 3, "nobody")
        produce("forged", 2, "nobody", "--bad", "sender")

        want = {("shared", 0): 50, ("shared~u65534", NOBODY): 40, ("mine", NOBODY): 30}
        got = collections.Counter()
        deadline = time.time() + 30
        while time.time() < deadline:
            r = subprocess.run([EXPORT, "--store", store, "--jsonl", "-"], capture_output=True, text=True)
            got = collections.Counter((e["job"], e["uid"]) for e in map(json.loads, r.stdout.splitlines())
                                      if e["kind"] in ("mpiio", "posix"))
            if sum(got.values()) >= sum(want.values()):
                break
            time.sleep(0.2)
        time.sleep(0.5)
        check(dict(got) == want, f"events per (job, uid): {dict(got)}, expected {want}")
        check("processes of uid 65534 name it too" in r.stderr, "no warning about the shared job: " + r.stderr)
        r = subprocess.run([EXPORT, "--store", store, "--list-jobs"], capture_output=True, text=True)
        check(sorted(line.split()[0] for line in r.stdout.splitlines()) == ["mine", "shared", "shared~u65534"],
              "--list-jobs: " + r.stdout)
    finally:
        a.terminate()
        a.wait()
        c.terminate()
        c.wait()
        log.close()
    text = open(os.path.join(tmp, "daemons.log"), errors="replace").read()
    check("the batch names its sender, which only the agent may do" in text,
          "the forged sender was not refused:\n" + text[-3000:])
    check("every local user may connect" in text, "start line does not say who may connect")
    check(" invalid=2 " in text, "forged batches not counted as invalid")
    if failures:
        print("files kept in", tmp)
        sys.exit(1)
    print("ok: root's job 'shared' 50 events; nobody's 'shared' kept apart (40) and 'mine' (30); "
          "2 batches naming a sender refused")
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
