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
from testlib import check, failures, free_port  # noqa: E402

COLLECTOR, AGENT, PRODUCER, EXPORT, SERVER_DEMO = sys.argv[1:6]
NOBODY = 65534


def as_nobody(cmd):
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] + cmd


def quota(tmp):
    """One user cannot fill the agent's store for the others: with the
    collector down, user nobody's producer runs into --max-pending-per-user
    and its further batches are kept as drop records (over_quota; beyond an
    eighth more dropped, their events then found lost) while root's are
    still taken; once the collector is back, the store counts them in
    nobody's job, and stored + over_quota + lost = made."""
    port = free_port()
    store, sock = os.path.join(tmp, "store2"), os.path.join(tmp, "run", "agent2.sock")
    log = open(os.path.join(tmp, "quota.log"), "wb")
    a = subprocess.Popen([AGENT, "--collector", f"tcp://127.0.0.1:{port}", "--listen", "ipc://" + sock,
                          "--node", "n2", "--state-dir", "none", "--stats-interval", "0.2s",
                          "--max-pending", "4M", "--max-pending-per-user", "256K"], stderr=log)
    c = None
    try:
        while not os.path.exists(sock):
            time.sleep(0.05)
        cmd = [PRODUCER, "--agent", "ipc://" + sock, "--node", "n2", "--job", "greedy", "--batches", "400",
               "--events-per-batch", "1000", "--rate", "100000"]
        greedy = subprocess.Popen(as_nobody(cmd), stdout=subprocess.PIPE, text=True)
        time.sleep(1.5)
        r = subprocess.run([PRODUCER, "--agent", "ipc://" + sock, "--node", "n2", "--job", "polite",
                            "--batches", "3", "--events-per-batch", "100"], capture_output=True, text=True)
        check(r.returncode == 0, "root's producer: " + r.stderr)
        c = subprocess.Popen([COLLECTOR, "--listen", f"tcp://127.0.0.1:{port}", "--store", store,
                              "--http", "off"], stderr=log)
        out, _ = greedy.communicate(timeout=60)
        made = 400 * 1000
        deadline = time.time() + 30
        got = {}
        while time.time() < deadline:
            r = subprocess.run([EXPORT, "--store", store, "--jsonl", "-"], capture_output=True, text=True)
            ev = [json.loads(x) for x in r.stdout.splitlines()]
            got = collections.Counter()
            for e in ev:
                got[(e["job"], e["kind"] == "drop" and e["reason"])] += e["dropped"] if e["kind"] == "drop" else 1
            if sum(n for (j, _), n in got.items() if j == "greedy") >= made and got[("polite", False)] == 300:
                break
            time.sleep(0.3)
        over, lost = got[("greedy", "over_quota")], got[("greedy", "lost")]
        check(over > 0, f"nothing of nobody's job was dropped over its quota: {dict(got)}")
        check(got[("greedy", False)] + over + lost == made,
              f"greedy: stored + over_quota + lost != made {made}: {dict(got)}")
        check(got[("polite", False)] == 300, f"root's batches were not taken: {dict(got)}")
        text = open(os.path.join(tmp, "quota.log"), errors="replace").read()
        check("user 65534 holds" in text and re.search(r"over_quota=[1-9]", text),
              "over-quota drops not logged and counted")
        print(f"ok: quota: nobody made {made} events, {got[('greedy', False)]} stored, {over} counted as "
              f"over_quota, {lost} as lost; root's 300 taken meanwhile")
    finally:
        a.terminate()
        a.wait()
        if c:
            c.terminate()
            c.wait()
        log.close()


def full(tmp):
    """A full agent keeps reading: with the collector down, a producer's
    batches beyond --max-pending are kept as drop records (agent_full), the
    producer exits, and once the collector is back the store accounts for
    every event it made, in its job: stored + agent_full = made."""
    port = free_port()
    store, sock = os.path.join(tmp, "store3"), os.path.join(tmp, "run", "agent3.sock")
    log = open(os.path.join(tmp, "full.log"), "wb")
    a = subprocess.Popen([AGENT, "--collector", f"tcp://127.0.0.1:{port}", "--listen", "ipc://" + sock,
                          "--node", "n3", "--state-dir", "none", "--stats-interval", "0.2s",
                          "--max-pending", "64K"], stderr=log)
    c = None
    try:
        while not os.path.exists(sock):
            time.sleep(0.05)
        batches, per = 300, 1000
        r = subprocess.run([PRODUCER, "--agent", "ipc://" + sock, "--node", "n3", "--job", "flood",
                            "--batches", str(batches), "--events-per-batch", str(per), "--rate", "100000"],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, "producer: " + r.stderr)
        made = batches * per
        c = subprocess.Popen([COLLECTOR, "--listen", f"tcp://127.0.0.1:{port}", "--store", store,
                              "--http", "off"], stderr=log)
        deadline = time.time() + 30
        got = collections.Counter()
        while time.time() < deadline:
            r = subprocess.run([EXPORT, "--store", store, "--jsonl", "-"], capture_output=True, text=True)
            got = collections.Counter()
            for e in map(json.loads, r.stdout.splitlines()):
                got[e["kind"] == "drop" and e["reason"]] += e["dropped"] if e["kind"] == "drop" else 1
            if sum(got.values()) >= made:
                break
            time.sleep(0.3)
        time.sleep(0.5)
        check(got["agent_full"] > 0, f"nothing kept as agent_full drop records: {dict(got)}")
        check(got[False] + got["agent_full"] == made and len(got) == 2,
              f"stored + agent_full != made {made}: {dict(got)}")
        r = subprocess.run([EXPORT, "--store", store, "--list-jobs"], capture_output=True, text=True)
        check(f"dropped={got['agent_full']}" in r.stdout.replace(" ", "").replace(",", "")
              or str(got["agent_full"]) in r.stdout, "--list-jobs does not show the drops: " + r.stdout)
        text = open(os.path.join(tmp, "full.log"), errors="replace").read()
        check("stored as drop records (agent_full)" in text and re.search(r"store_full=[1-9]", text),
              "full store not logged and counted")
        print(f"ok: full agent: made {made} events, {got[False]} stored, {got['agent_full']} counted as "
              f"agent_full, none unexplained")
    finally:
        a.terminate()
        a.wait()
        if c:
            c.terminate()
            c.wait()
        log.close()


def forged(tmp):
    """A user forging a new producer identity for every batch cannot fill the
    full agent's counts for the others: with --max-pending-per-user each
    user has an eighth of them; nobody's beyond that are discarded (and
    counted), root's batches that arrive afterwards are still counted,
    exactly: stored + over_quota + agent_full = made."""
    port = free_port()
    store, sock = os.path.join(tmp, "store4"), os.path.join(tmp, "run", "agent4.sock")
    log = open(os.path.join(tmp, "forged.log"), "wb")
    a = subprocess.Popen([AGENT, "--collector", f"tcp://127.0.0.1:{port}", "--listen", "ipc://" + sock,
                          "--node", "n4", "--state-dir", "none", "--stats-interval", "0.2s",
                          "--max-pending", "64K", "--max-pending-per-user", "32K"], stderr=log)
    c = None
    try:
        while not os.path.exists(sock):
            time.sleep(0.05)
        r = subprocess.run(as_nobody([PRODUCER, "--agent", "ipc://" + sock, "--node", "n4", "--job", "forger",
                                      "--batches", "3000", "--events-per-batch", "20", "--forge"]),
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, "forging producer: " + r.stderr)
        batches, per = 200, 500
        r = subprocess.run([PRODUCER, "--agent", "ipc://" + sock, "--node", "n4", "--job", "honest",
                            "--batches", str(batches), "--events-per-batch", str(per)],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, "root's producer: " + r.stderr)
        made = batches * per
        c = subprocess.Popen([COLLECTOR, "--listen", f"tcp://127.0.0.1:{port}", "--store", store,
                              "--http", "off"], stderr=log)
        deadline = time.time() + 30
        got = collections.Counter()
        while time.time() < deadline:
            r = subprocess.run([EXPORT, "--store", store, "--job", "honest", "--jsonl", "-"],
                               capture_output=True, text=True)
            got = collections.Counter()
            for e in map(json.loads, r.stdout.splitlines()):
                got[e["kind"] == "drop" and e["reason"]] += e["dropped"] if e["kind"] == "drop" else 1
            if sum(got.values()) >= made:
                break
            time.sleep(0.3)
        time.sleep(0.5)
        counted = got["agent_full"] + got["over_quota"]
        check(got[False] + counted == made and len(got) <= 3,
              f"root's job: stored + counted != made {made}: {dict(got)}")
        check(counted > 0, f"root's batches were not counted when over its share: {dict(got)}")
        text = open(os.path.join(tmp, "forged.log"), errors="replace").read()
        m = re.findall(r"discarded=(\d+)", text)
        check(m and int(m[-1]) > 0, "none of the forger's batches discarded: its share was not limited")
        print(f"ok: forged identities: nobody's 3000 batches, {m[-1] if m else '?'} discarded beyond its share; "
              f"root's {made} events after it: {got[False]} stored + {got['over_quota']} over_quota + "
              f"{got['agent_full']} agent_full")
    finally:
        a.terminate()
        a.wait()
        if c:
            c.terminate()
            c.wait()
        log.close()


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
