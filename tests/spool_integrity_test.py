#!/usr/bin/env python3
"""The agent's spool against a full disk and a damaged byte, its producers
run as user nobody, the collector down while the agent is killed.

full_disk: the state directory is a 256 KiB tmpfs. A job's batches fill it,
the rest are held in memory only, each with a drop record in the spool's
reserve; the job ends, the agent is killed (-9) with them unacknowledged;
a second job is running when the next agent is killed too. Once the
collector is up and a third agent runs, every event of both jobs is stored
or counted: stored + dropped (lost, unreadable, ...) = made, and the agent
said so loudly.

damaged: one byte of the newest spool segment, at 30 % of its length, is
flipped while the agent is down. The next agent skips that one batch by its
framing, counts its events (unreadable) and sends every batch after it."""
import glob
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import check, finish, free_port, job_total, store_counts, until  # noqa: E402

CASE, COLLECTOR, AGENT, PRODUCER, EXPORT = sys.argv[1:6]
NOBODY = 65534
PER = 500


def as_nobody(cmd):
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] + cmd


class Node:
    def __init__(self, tmp, state):
        self.tmp, self.state = tmp, state
        self.port = free_port()
        self.store = os.path.join(tmp, "store")
        self.sock = os.path.join(tmp, "run", "agent.sock")
        self.log_path = os.path.join(tmp, "daemons.log")
        self.log = open(self.log_path, "ab")
        self.agent = self.collector = None

    def start_agent(self):
        before = self.text().count("listening for producers")
        self.agent = subprocess.Popen([AGENT, "--collector", f"tcp://127.0.0.1:{self.port}",
                                       "--listen", "ipc://" + self.sock, "--node", "n1",
                                       "--state-dir", self.state, "--spool-sync", "always",
                                       "--stats-interval", "0.2s"], stderr=self.log)
        check(until(lambda: self.text().count("listening for producers") > before, 30),
              "the agent did not start")

    def kill_agent(self):
        self.agent.kill()
        self.agent.wait()
        self.agent = None

    def start_collector(self):
        self.collector = subprocess.Popen([COLLECTOR, "--listen", f"tcp://127.0.0.1:{self.port}",
                                           "--store", self.store, "--http", "off"], stderr=self.log)

    def producer(self, job, batches, wait=True):
        cmd = as_nobody([PRODUCER, "--agent", "ipc://" + self.sock, "--node", "n1", "--job", job,
                         "--batches", str(batches), "--events-per-batch", str(PER),
                         "--linger", "600"])
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if wait:
            out, err = p.communicate(timeout=120)
            check(p.returncode == 0, f"producer {job}: {err}")
        return p

    def stat(self, name):
        """The latest value of a counter on the agent's stats line."""
        m = re.findall(r"stats: .*\b" + name + r"=(\d+)", self.text())
        return int(m[-1]) if m else 0

    def counts(self, done):
        """Events per (job, drop reason or False), once done(counts) or after 90 s."""
        return store_counts(EXPORT, self.store, done, 90)

    def text(self):
        self.log.flush()
        return open(self.log_path, errors="replace").read()

    def close(self):
        for p in (self.agent, self.collector):
            if p:
                p.terminate()
                p.wait()
        self.log.close()


def full_disk(tmp):
    state = os.path.join(tmp, "state")
    os.makedirs(state)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", state], check=True)
    n = Node(tmp, state)
    try:
        n.start_agent()
        # The job ends while the collector is down: the batches the disk
        # did not take are held in memory only when the agent is killed.
        after = 120
        n.producer("after", after)
        check(until(lambda: n.stat("received") >= after, 60), "the agent did not take the job's batches")
        reserved = n.stat("spool_reserved")
        n.kill_agent()
        # A second agent on the same full disk, killed while a job runs.
        n.start_agent()
        during = n.producer("during", 200, wait=False)
        check(until(lambda: "its reserve is full: not reading" in n.text() or n.stat("received") >= 200, 60),
              "the second agent neither stopped reading nor took the job")
        n.kill_agent()
        n.start_collector()
        n.start_agent()
        out, err = during.communicate(timeout=180)
        check(during.returncode == 0, f"producer during: {err}")
        want = {"after": after * PER, "during": 200 * PER}
        got = n.counts(lambda g: all(job_total(g, j) >= m for j, m in want.items()))
        for job, made in want.items():
            stored = got[(job, False)]
            counted = job_total(got, job) - stored
            check(job_total(got, job) == made,
                  f"{job}: stored {stored} + counted {counted} != made {made}, "
                  f"{made - job_total(got, job)} lost silently: {dict(got)}")
        text = n.text()
        check(reserved > 0 and got[("after", "lost")] > 0,
              f"no batch of the ended job was counted from the reserve (spool_reserved={reserved}): {dict(got)}")
        check("its drop record kept in the reserve" in text and "drop records are sent" in text,
              "the refused batches were not reported loudly")
        print(f"ok: full disk: 'after' made {want['after']}: {got[('after', False)]} stored, "
              f"{job_total(got, 'after') - got[('after', False)]} counted "
              f"({got[('after', 'lost')]} lost from {reserved} reserved batches); 'during' made "
              f"{want['during']}: {got[('during', False)]} stored, "
              f"{job_total(got, 'during') - got[('during', False)]} counted "
              f"({ {r: c for (j, r), c in got.items() if j == 'during' and r} }); none silently")
    finally:
        n.close()
        subprocess.run(["umount", state])


def damaged(tmp):
    state = os.path.join(tmp, "state")
    n = Node(tmp, state)
    try:
        n.start_agent()
        made = 100
        n.producer("flip", made)
        check(until(lambda: n.stat("received") >= made, 60), "the agent did not take the job's batches")
        n.kill_agent()
        newest = sorted(glob.glob(os.path.join(state, "spool", "*.seg")))[-1]
        with open(newest, "r+b") as f:
            size = f.seek(0, 2)
            f.seek(size * 3 // 10)
            b = f.read(1)
            f.seek(size * 3 // 10)
            f.write(bytes([b[0] ^ 0xff]))
        n.start_collector()
        n.start_agent()
        got = n.counts(lambda g: job_total(g, "flip") >= made * PER)
        stored = got[("flip", False)]
        check(job_total(got, "flip") == made * PER,
              f"stored {stored} + counted {job_total(got, 'flip') - stored} != made {made * PER}: {dict(got)}")
        # Counted as unreadable by the agent when the batch's envelope is
        # sound, else as lost by the readers (its producer's later batches
        # carry its running total): one batch's worth either way.
        check(got[("flip", "unreadable")] + got[("flip", "lost")] == PER,
              f"the damaged batch was not counted exactly: {dict(got)}")
        check(stored >= (made - 1) * PER, f"more than the damaged batch was lost: {stored} stored")
        check("the batches after it are sent" in n.text(), "the damage was not reported")
        print(f"ok: damaged byte at 30 % of {os.path.basename(newest)} ({size} bytes): made {made * PER}, "
              f"{stored} stored, {got[('flip', 'unreadable')]} unreadable, "
              f"{job_total(got, 'flip') - stored - got[('flip', 'unreadable')]} otherwise counted")
    finally:
        n.close()


def main():
    if os.geteuid() != 0:
        print("skipped: needs root to mount a tmpfs and run producers as another user")
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="iotrace-spool-")
    os.chmod(tmp, 0o755)
    {"full_disk": full_disk, "damaged": damaged}[CASE](tmp)
    sys.exit(finish(tmp))


main()
