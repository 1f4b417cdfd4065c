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
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import check, failures, free_port, job_total, store_counts  # noqa: E402

COLLECTOR, AGENT, PRODUCER, EXPORT, SERVER_DEMO = sys.argv[1:6]
NOBODY = 65534


def as_nobody(cmd):
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] + cmd


class Node:
    """An agent of its own for one scenario, its collector started later
    (down until then), both logging into NAME.log."""

    def __init__(self, tmp, name, *options, prefix=()):
        self.port = free_port()
        self.store = os.path.join(tmp, "store-" + name)
        self.sock = os.path.join(tmp, "run", f"agent-{name}.sock")
        self.log_path = os.path.join(tmp, name + ".log")
        self.log = open(self.log_path, "wb")
        self.name = name
        self.collector = None
        self.agent = subprocess.Popen([*prefix, AGENT, "--collector", f"tcp://127.0.0.1:{self.port}",
                                       "--listen", "ipc://" + self.sock, "--node", name, "--state-dir", "none",
                                       "--stats-interval", "0.2s", *options], stderr=self.log)
        while not os.path.exists(self.sock):
            time.sleep(0.05)

    def producer(self, job, batches, per, *extra, user=None, wait=True):
        cmd = [PRODUCER, "--agent", "ipc://" + self.sock, "--node", self.name, "--job", job,
               "--batches", str(batches), "--events-per-batch", str(per), *extra]
        cmd = as_nobody(cmd) if user else cmd
        if not wait:
            return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, f"producer {job}: {r.stderr}")
        return r

    def start_collector(self):
        self.collector = subprocess.Popen([COLLECTOR, "--listen", f"tcp://127.0.0.1:{self.port}",
                                           "--store", self.store, "--http", "off"], stderr=self.log)

    def counts(self, done):
        """Events per (job, drop reason or False), once done(counts) or after 30 s."""
        got = store_counts(EXPORT, self.store, done, 30)
        time.sleep(0.5)
        return got

    def text(self):
        return open(self.log_path, errors="replace").read()

    def close(self):
        for p in (self.agent, self.collector):
            if p:
                p.terminate()
                p.wait()
        self.log.close()


def quota(tmp):
    """One user cannot fill the agent's store for the others: with the
    collector down, user nobody's producer runs into --max-pending-per-user
    and its further batches are counted as drop records (over_quota) while
    root's are still taken; once the collector is back, the store counts
    them in nobody's job, and stored + over_quota + lost = made."""
    n = Node(tmp, "quota", "--max-pending", "4M", "--max-pending-per-user", "256K")
    try:
        greedy = n.producer("greedy", 400, 1000, "--rate", "100000", user="nobody", wait=False)
        time.sleep(1.5)
        n.producer("polite", 3, 100)
        n.start_collector()
        greedy.communicate(timeout=60)
        made = 400 * 1000
        got = n.counts(lambda g: job_total(g, "greedy") >= made and g[("polite", False)] == 300)
        over, lost = got[("greedy", "over_quota")], got[("greedy", "lost")]
        check(over > 0, f"nothing of nobody's job was dropped over its quota: {dict(got)}")
        check(got[("greedy", False)] + over + lost == made,
              f"greedy: stored + over_quota + lost != made {made}: {dict(got)}")
        check(got[("polite", False)] == 300, f"root's batches were not taken: {dict(got)}")
        check("user 65534 holds" in n.text() and re.search(r"over_quota=[1-9]", n.text()),
              "over-quota drops not logged and counted")
        print(f"ok: quota: nobody made {made} events, {got[('greedy', False)]} stored, {over} counted as "
              f"over_quota, {lost} as lost; root's 300 taken meanwhile")
    finally:
        n.close()


def full(tmp):
    """A full agent keeps reading: with the collector down, a producer's
    batches beyond --max-pending are counted as drop records (agent_full),
    the producer exits, and once the collector is back the store accounts
    for every event it made, in its job: stored + agent_full = made."""
    n = Node(tmp, "full", "--max-pending", "64K", "--max-pending-per-user", "64K")
    try:
        batches, per = 300, 1000
        n.producer("flood", batches, per, "--rate", "100000")
        made = batches * per
        n.start_collector()
        got = n.counts(lambda g: job_total(g, "flood") >= made)
        check(got[("flood", "agent_full")] > 0, f"nothing counted as agent_full: {dict(got)}")
        check(got[("flood", False)] + got[("flood", "agent_full")] == made and len(got) == 2,
              f"stored + agent_full != made {made}: {dict(got)}")
        r = subprocess.run([EXPORT, "--store", n.store, "--list-jobs"], capture_output=True, text=True)
        listed = re.search(r"^flood .*\bevents=(\d+) dropped=(\d+)", r.stdout, re.M)
        check(listed and (int(listed[1]), int(listed[2])) == (got[("flood", False)], got[("flood", "agent_full")]),
              "--list-jobs does not give the same counts: " + r.stdout)
        check("stored as drop records (agent_full)" in n.text() and re.search(r"store_full=[1-9]", n.text()),
              "full store not logged and counted")
        print(f"ok: full agent: made {made} events, {got[('flood', False)]} stored, "
              f"{got[('flood', 'agent_full')]} counted as agent_full, none unexplained")
    finally:
        n.close()


def forged(tmp):
    """A user forging a new producer identity for every batch cannot fill the
    full agent's counts for the others: with --max-pending-per-user each
    user has an eighth of them; nobody's beyond that are discarded (and
    counted), root's batches that arrive afterwards are still counted,
    exactly: stored + over_quota + agent_full = made."""
    n = Node(tmp, "forged", "--max-pending", "64K", "--max-pending-per-user", "32K")
    try:
        n.producer("forger", 3000, 20, "--forge", user="nobody")
        batches, per = 200, 500
        n.producer("honest", batches, per)
        made = batches * per
        n.start_collector()
        got = n.counts(lambda g: job_total(g, "honest") >= made)
        counted = got[("honest", "agent_full")] + got[("honest", "over_quota")]
        check(got[("honest", False)] + counted == made and job_total(got, "honest") == made,
              f"root's job: stored + counted != made {made}: {dict(got)}")
        check(counted > 0, f"root's batches were not counted when over its share: {dict(got)}")
        m = re.findall(r"discarded=(\d+)", n.text())
        check(m and int(m[-1]) > 0, "none of the forger's batches discarded: its share was not limited")
        # Every batch sent reached the agent's counters: none vanished in
        # the socket when its producer exited (common/handover.h).
        last = re.findall(r"stats: received=(\d+) invalid=(\d+) .* discarded=(\d+)", n.text())
        taken = sum(map(int, last[-1])) if last else 0
        check(taken == 3000 + batches, f"the agent took {taken} batches of the {3000 + batches} sent")
        print(f"ok: forged identities: nobody's 3000 batches, {m[-1] if m else '?'} discarded beyond its share; "
              f"root's {made} events after it: {got[('honest', False)]} stored + "
              f"{got[('honest', 'over_quota')]} over_quota + {got[('honest', 'agent_full')]} agent_full")
    finally:
        n.close()


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
        # A storage server (root) serving requests whose CallID tags name
        # 'shared': 3 for uid 0, 2 for nobody, 1 naming no user.
        # The same server run by nobody speaks for nobody alone, whatever
        # its tags say: its 6 are nobody's.
        for user in (None, "nobody"):
            cmd = [SERVER_DEMO, "brick-" + (user or "root"), "users", "shared"]
            r = subprocess.run(as_nobody(cmd) if user else cmd, capture_output=True, text=True,
                               env=dict(os.environ, IOTRACE_AGENT="ipc://" + sock, IOTRACE_NODE="n1"))
            check(r.returncode == 0 and "recorded 6 dropped 0" in r.stdout,
                  f"server demo as {user or 'root'}: {r.stdout} {r.stderr}")
        want_disk = {"shared": 4, "shared~u65534": 8}

        want = {("shared", 0): 50, ("shared~u65534", NOBODY): 40, ("mine", NOBODY): 30}
        got = collections.Counter()
        deadline = time.time() + 30
        while time.time() < deadline:
            r = subprocess.run([EXPORT, "--store", store, "--jsonl", "-"], capture_output=True, text=True)
            events = list(map(json.loads, r.stdout.splitlines()))
            got = collections.Counter((e["job"], e["uid"]) for e in events if e["kind"] in ("mpiio", "posix"))
            disk = collections.Counter(e["job"] for e in events if e["kind"] == "disk")
            if sum(got.values()) >= sum(want.values()) and sum(disk.values()) >= 12:
                break
            time.sleep(0.2)
        time.sleep(0.5)
        check(dict(got) == want, f"events per (job, uid): {dict(got)}, expected {want}")
        check(dict(disk) == want_disk, f"disk operations per job: {dict(disk)}, expected {want_disk}")
        check("processes of uid 65534 name it too" in r.stderr, "no warning about the shared job: " + r.stderr)
        r = subprocess.run([EXPORT, "--store", store, "--list-jobs"], capture_output=True, text=True)
        check(sorted(line.split()[0] for line in r.stdout.splitlines()) == ["mine", "shared", "shared~u65534"],
              "--list-jobs: " + r.stdout)
        users = {line.split()[0]: line.split(" uid=")[1].split()[0] for line in r.stdout.splitlines()
                 if " uid=" in line}
        check(users == {"mine": "65534", "shared": "0", "shared~u65534": "65534"}, f"job owners: {users}")
    finally:
        a.terminate()
        a.wait()
        c.terminate()
        c.wait()
        log.close()
    quota(tmp)
    full(tmp)
    forged(tmp)
    text = open(os.path.join(tmp, "daemons.log"), errors="replace").read()
    check("the batch names its sender, which only the agent may do" in text,
          "the forged sender was not refused:\n" + text[-3000:])
    check("every local user may connect" in text, "start line does not say who may connect")
    check(" invalid=2 " in text, "forged batches not counted as invalid")
    if failures:
        print("files kept in", tmp)
        sys.exit(1)
    print("ok: root's job 'shared' 50 events; nobody's 'shared' kept apart (40) and 'mine' (30); "
          "disk operations tagged 'shared': root's 3 and the untagged user's 1 in 'shared', nobody's 2 "
          "and all 6 of a server nobody runs kept apart; "
          "2 batches naming a sender refused")
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
