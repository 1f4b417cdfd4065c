#!/usr/bin/env python3
"""Faults injected into the store's system calls under the real collector,
agent and producer: no batch is acknowledged that a power cut could take
away, and every batch ends up in the store exactly once.

One agent runs throughout; for each scenario a collector is started on the
same store with tests/tools/faultfs.c preloaded and one fault rule (EIO or
ENOSPC from write, fdatasync, fsync of the directory, the creation of a
segment, the cut of a failed tail; or a sync that never returns, to kill
the collector between its write and its sync), and a producer sends a few
dozen batches through the agent.  The collector must do what
docs/collector.md says: on EIO log it and exit 1, on ENOSPC stay up and
store again once there is room.

The preloaded library logs every sync, failed sync, cut and new file, from
which the test knows what a power cut would leave: a file cut to the size
its last successful sync covered, a new file whose directory was never
synced gone, and bytes written before a failed sync zeroed even if a later
sync succeeded (the kernel may drop pages it failed to write back and
report it only once).  After some scenarios the test makes that power cut
for real on the store.  Whatever the collector acknowledged before it must
survive: the agent forgets an acknowledged batch, so a batch lost to the
cut is missing at the end, while one not acknowledged is sent again.  At
the end a collector without faults takes what the agents still hold, the
final power cut is made, and the store must pass --verify and hold every
event made exactly once.

Then, on a store of its own, collector_client sends every batch twice back
to back while the first group's sync fails with ENOSPC: the copies answered
DUPLICATE within that group must lose that answer with the group, and every
batch must end STORED once (tests/unit/collector_client.c, withdraw).

    store_faults_test.py COLLECTOR AGENT PRODUCER EXPORT FAULTFS CLIENT

FAULTFS is what goes into LD_PRELOAD (the ASan runtime first in a
sanitizer build).
"""
import collections
import glob
import os
import signal
import subprocess
import sys
import tempfile
import time

from testlib import check, finish, free_port, stop_all

COLLECTOR, AGENT, PRODUCER, EXPORT, FAULTFS, CLIENT = sys.argv[1:7]
BATCHES, PER_BATCH = 24, 40
JOB = "faultjob"

# (fault rules, what the collector does, batches sent, power cut afterwards,
# segment size)
#   exit: logs the error and exits 1;  full: stays up, stores again once a
#   retry finds room;  hang: the rule stops it inside a call, it is killed;
#   quiet: nothing need happen (the rule may not fire), killed after 3 s.
# Segments of 4 KiB rotate every few batches; 1 MiB keeps a restarted
# collector writing to the segment it reopened.
SCENARIOS = [
    # EIO on the sync of a group: the batches it held are not acknowledged,
    # and what it wrote must not pass for stored with the next collector.
    ("fdatasync:EIO:after=2:dirty", "exit", BATCHES, False, "4K"),
    ("write:EIO:after=3:torn", "exit", BATCHES, True, "4K"),
    # Rotation: a new segment that cannot be made, or whose name cannot be
    # made durable (the directory's fsync).
    ("create:EIO:after=0", "exit", BATCHES, False, "4K"),
    ("fsync:EIO:after=0", "exit", BATCHES, True, "4K"),
    # No room for the first write of a restarted collector (torn): the
    # store cuts the failed write, and only it, when it writes again.
    ("write:ENOSPC:after=0:torn:file=segment-", "full", BATCHES, True, "1M"),
    # Killed between the write of a group and its sync (nothing else is
    # pending): the next collector finds the batch in the store and would
    # answer its resend DUPLICATE; the batch must be durable before that
    # answer, which the power cut after it checks.
    ("fdatasync:HANG:after=0:dirty:file=segment-", "hang", 1, False, "1M"),
    ("fdatasync:HANG:after=0:file=segment-", "quiet", 0, True, "1M"),
    # No room for a sync, for a new segment.
    ("fdatasync:ENOSPC:after=3:dirty", "full", BATCHES, False, "4K"),
    ("create:ENOSPC:after=0", "full", BATCHES, True, "4K"),
    # No room for a group's sync (no rotation: 1 MiB), then EIO when the
    # store cuts the failed tail to write again.
    ("fdatasync:ENOSPC:after=1:dirty,ftruncate:EIO:after=0:file=segment-", "exit", BATCHES,
     False, "1M"),
    # The store's last segment cannot be opened at start.
    ("open:EIO:after=0:file=segment-", "exit", BATCHES, False, "4K"),
    # Anywhere, at random (a fixed seed).
    ("write:EIO:p=0.08,fdatasync:EIO:p=0.08:dirty", "exit", BATCHES, True, "4K"),
]


class Disk:
    """What a power cut would leave of the store, from faultfs's log."""

    def __init__(self, log):
        self.log, self.offset = log, 0
        self.files = {}  # path: {"synced": bytes or None, "poison": [[a, b]], "named": bool}
        self.faults = 0
        self.kinds = collections.Counter()
        self.cut_bytes = 0

    def update(self):
        if not os.path.exists(self.log):
            return
        with open(self.log) as f:
            f.seek(self.offset)
            lines = f.readlines()
            self.offset = f.tell()
        for line in lines:
            w = line.split()
            kind, path = w[0], w[3] if w[0] == "fault" else w[2]
            if kind == "fault":
                self.faults += 1
                self.kinds[f"{w[2]} {w[3]}"] += 1
                continue
            if kind == "create":
                self.files[path] = {"synced": None, "poison": [], "named": False}
                continue
            if kind == "dirsync":
                for state in self.files.values():
                    state["named"] = True
                continue
            if kind == "unlink":
                self.files.pop(path, None)
                continue
            state = self.files.setdefault(path, {"synced": None, "poison": [], "named": True})
            if kind == "sync":
                state["synced"] = int(w[3])
            elif kind == "syncfail":
                start = state["synced"] or 0
                if int(w[3]) > start:
                    state["poison"].append([start, int(w[3])])
            elif kind == "truncate":
                n = int(w[3])
                if state["synced"] is not None:
                    state["synced"] = min(state["synced"], n)
                state["poison"] = [[a, min(b, n)] for a, b in state["poison"] if a < n]

    def unsynced(self, store):
        """Bytes of the segments that no sync covered."""
        self.update()
        n = 0
        for path in glob.glob(os.path.join(store, "segment-*.iots")):
            state = self.files.get(path)
            n += os.path.getsize(path) - ((state or {}).get("synced") or 0)
        return n

    def power_cut(self, store):
        """Makes the store what a power cut now would leave of it."""
        self.update()
        for path in sorted(glob.glob(os.path.join(store, "segment-*.iots"))):
            state = self.files.get(path)
            size = os.path.getsize(path)
            if not state or state["synced"] is None or not state["named"]:
                os.unlink(path)
                self.files.pop(path, None)
                self.cut_bytes += size
                continue
            keep = min(size, state["synced"])
            with open(path, "r+b") as f:
                f.truncate(keep)
                for a, b in state["poison"]:
                    if a < keep:
                        f.seek(a)
                        f.write(b"\0" * (min(b, keep) - a))
                        self.cut_bytes += min(b, keep) - a
            self.cut_bytes += size - keep
            state["synced"] = keep


def agent_stats(alog):
    """The agent's last stats line as {name: value}."""
    last = {}
    with open(alog) as f:
        for line in f:
            if " stats: " in line:
                last = dict(w.split("=", 1) for w in line.split(" stats: ", 1)[1].split())
    return last


def wait_for(cond, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def check_withdrawn_copies(tmp):
    store = os.path.join(tmp, "store-withdraw")
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    log = os.path.join(tmp, "collector-withdraw.log")
    env = dict(os.environ, LD_PRELOAD=FAULTFS, IOTRACE_FAULT_DIR=store,
               IOTRACE_FAULT="fdatasync:ENOSPC:after=1:count=1:dirty",
               IOTRACE_FAULT_LOG=os.path.join(tmp, "faultfs-withdraw.log"))
    p = subprocess.Popen([COLLECTOR, "--listen", endpoint, "--store", store, "--http", "off",
                          "--analysis", "off"], stderr=open(log, "w"), env=env)
    try:
        r = subprocess.run([CLIENT, endpoint, "withdraw", "64"], capture_output=True, text=True,
                           timeout=120)
        check(r.returncode == 0, f"collector_client withdraw: {r.stdout} {r.stderr}")
        print(r.stdout.strip())
    finally:
        stop_all([p])
    v = subprocess.run([EXPORT, "--store", store, "--verify"], capture_output=True, text=True)
    check(v.returncode == 0, f"--verify of the withdraw store: {v.stdout} {v.stderr}")
    print(v.stdout.strip().splitlines()[0] if v.stdout.strip() else "")


def main():
    tmp = tempfile.mkdtemp(prefix="iot-store-faults-")
    store = os.path.join(tmp, "store")
    flog = os.path.join(tmp, "faultfs.log")
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    sock = os.path.join(tmp, "agent.sock")
    alog = os.path.join(tmp, "agent.log")
    disk = Disk(flog)
    procs = []
    made = exits = cuts = 0

    def collector(rules, name, segment_size="4K"):
        env = dict(os.environ, LD_PRELOAD=FAULTFS, IOTRACE_FAULT_DIR=store, IOTRACE_FAULT=rules,
                   IOTRACE_FAULT_LOG=flog, IOTRACE_FAULT_SEED="7")
        log = os.path.join(tmp, f"collector-{name}.log")
        p = subprocess.Popen([COLLECTOR, "--listen", endpoint, "--store", store, "--http", "off",
                              "--analysis", "off", "--segment-size", segment_size],
                             stderr=open(log, "w"), env=env)
        procs.append(p)
        return p, log

    def produce(rank, batches):
        nonlocal made
        if not batches:
            return
        r = subprocess.run([PRODUCER, "--agent", "ipc://" + sock, "--job", JOB, "--rank",
                            str(rank), "--batches", str(batches), "--events-per-batch",
                            str(PER_BATCH), "--rate", "4000"],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and "dropped_batches=0" in r.stdout,
              f"producer {rank}: {r.stdout} {r.stderr}")
        made += batches * PER_BATCH

    def pending():
        return int(agent_stats(alog).get("pending", -1))

    def welcomes():
        with open(alog) as f:
            return f.read().count("collector welcomed us")

    try:
        agent = subprocess.Popen([AGENT, "--collector", endpoint, "--listen", "ipc://" + sock,
                                  "--credit-timeout", "1s", "--stats-interval", "0.1s",
                                  "--clock-interval", "0", "--drain-timeout", "20s"],
                                 stderr=open(alog, "w"))
        procs.append(agent)
        for i, (rules, does, batches, cut, segment_size) in enumerate(SCENARIOS, 1):
            disk.update()
            faults_before = disk.faults
            what = f"scenario {i} ({rules})"
            check(does != "hang" or pending() == 0, f"{what}: batches pending before it")
            welcomed = welcomes()
            c, clog = collector(rules, str(i), segment_size)
            # Batches made before the agent is back in session would reach
            # the collector in one burst, one group: fewer syncs to fail.
            wait_for(lambda: welcomes() > welcomed or c.poll() is not None
                     or (disk.update(), disk.faults > faults_before)[1], 10)
            produce(i, batches)
            if does == "exit":
                check(wait_for(lambda: c.poll() is not None, 20), f"{what}: collector still up")
            elif does == "full":
                check(wait_for(lambda: "No space left on device: batches are not acknowledged"
                               in open(clog).read(), 15), f"{what}: no room not logged")
                check(c.poll() is None, f"{what}: the collector exited on a full disk")
                check(wait_for(lambda: "store: writing again after" in open(clog).read()
                               and pending() == 0, 30),
                      f"{what}: not every batch stored after the retry (pending {pending()})")
            elif does == "hang":
                check(wait_for(lambda: (disk.update(), disk.faults > faults_before)[1], 20),
                      f"{what}: the call did not hang")
            else:
                wait_for(lambda: pending() == 0, 3)
            if c.poll() is None:
                c.send_signal(signal.SIGKILL)
            rc = c.wait(timeout=30)
            log = open(clog).read()
            if does == "exit":
                exits += 1
                check(rc == 1, f"{what}: exit status {rc}, expected 1")
                check(any(" error: " in line and "Input/output error" in line
                          for line in log.splitlines()), f"{what}: EIO not logged:\n{log}")
            check("AddressSanitizer" not in log and "runtime error" not in log,
                  f"{what}: sanitizer report:\n{log}")
            disk.update()
            check(does == "quiet" or disk.faults > faults_before, f"{what}: no fault injected")
            check(does != "hang" or disk.unsynced(store) > 0,
                  f"{what}: killed with nothing written that no sync covered")
            if cut:
                disk.power_cut(store)
                cuts += 1

        # No faults: what the agent still holds is stored, then the final cut.
        c, clog = collector("", "final")
        check(wait_for(lambda: pending() == 0, 30), f"final collector: agent holds {pending()}")
        agent.send_signal(signal.SIGTERM)
        check(agent.wait(timeout=60) == 0, "agent exit status")
        c.send_signal(signal.SIGTERM)
        check(c.wait(timeout=30) == 0, "final collector exit status")
        disk.power_cut(store)
        cuts += 1
        stats = agent_stats(alog)
        check("all batches acknowledged" in open(alog).read(), "the agent lost batches")

        v = subprocess.run([EXPORT, "--store", store, "--verify"], capture_output=True, text=True)
        check(v.returncode == 0 and "verdict ok" in v.stdout and "end complete" in v.stdout,
              f"--verify after the final power cut: {v.stdout} {v.stderr}")
        j = subprocess.run([EXPORT, "--store", store, "--jsonl", "-", "--job", JOB],
                           capture_output=True, text=True)
        events = collections.Counter(j.stdout.splitlines())
        stored = len(events)
        twice = sum(n - 1 for n in events.values() if n > 1)
        check(j.returncode == 0, f"--jsonl: {j.stderr}")
        check(twice == 0, f"{twice} events stored more than once")
        check(stored == made, f"{made} events made, {stored} in the store: "
                              f"{made - stored} acknowledged and lost")
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(disk.kinds.items()))
        print(f"store faults: {len(SCENARIOS)} scenarios, {disk.faults} faults injected "
              f"({kinds}), "
              f"{exits} collector exits, {cuts} power cuts ({disk.cut_bytes} bytes cut); "
              f"events made {made}, stored {stored}, stored twice {twice}, "
              f"missing {made - stored}; agent: batches acknowledged {stats.get('acked')} "
              f"(duplicate {stats.get('duplicate')}), resent {stats.get('resent')}, "
              f"reconnects {stats.get('reconnects')}")
    finally:
        stop_all(procs)
    check_withdrawn_copies(tmp)
    return finish(tmp)


if __name__ == "__main__":
    sys.exit(main())
