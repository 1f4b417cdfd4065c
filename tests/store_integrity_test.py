#!/usr/bin/env python3
"""The store knows what it should hold. User nobody's producer fills a
store of several segments through a root agent and collector; copies of it
are then cut at the tail (5 000 bytes, and exactly at a record boundary),
lose their first, a middle or their last segment, or get one bit flipped
in a record. For each, --jsonl, --stats and --list-jobs export what is
there, say on stderr what is missing and exit 3; --verify says `damaged`;
a flipped bit costs that one batch, and the collector starts on that store,
reporting it."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import check, finish, free_port, until  # noqa: E402

COLLECTOR, AGENT, PRODUCER, EXPORT = sys.argv[1:5]
NOBODY = 65534
BATCHES, PER = 300, 100


def as_nobody(cmd):
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] + cmd


def segments(store):
    return sorted(f for f in os.listdir(store) if f.startswith("segment-"))


def events(store):
    """Events exported as --jsonl (stored ones, not drop records), the exit
    status and stderr."""
    r = subprocess.run([EXPORT, "--store", store, "--jsonl", "-"], capture_output=True, text=True)
    n = sum(1 for e in map(json.loads, r.stdout.splitlines()) if e["kind"] != "drop")
    return n, r.returncode, r.stderr


def record_ends(path):
    """Offsets where the records of a segment end."""
    ends, off = [], 16
    with open(path, "rb") as f:
        data = f.read()
    while off + 24 <= len(data):
        off += 24 + struct.unpack_from("<I", data, off + 8)[0]
        ends.append(off)
    return ends


def make_store(tmp):
    port = free_port()
    store = os.path.join(tmp, "store")
    sock = os.path.join(tmp, "run", "agent.sock")
    log = open(os.path.join(tmp, "daemons.log"), "ab")
    c = subprocess.Popen([COLLECTOR, "--listen", f"tcp://127.0.0.1:{port}", "--store", store, "--http", "off",
                          "--segment-size", "64K"], stderr=log)
    a = subprocess.Popen([AGENT, "--collector", f"tcp://127.0.0.1:{port}", "--listen", "ipc://" + sock,
                          "--node", "n1", "--state-dir", "none"], stderr=log)
    try:
        check(until(lambda: os.path.exists(sock), 20), "the agent did not start")
        r = subprocess.run(as_nobody([PRODUCER, "--agent", "ipc://" + sock, "--node", "n1", "--job", "j",
                                      "--batches", str(BATCHES), "--events-per-batch", str(PER)]),
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, "producer: " + r.stderr)
        check(until(lambda: events(store)[0] >= BATCHES * PER, 60), "the store did not get every event")
    finally:
        for p in (a, c):
            p.terminate()
            p.wait()
        log.close()
    return store


def damaged(tmp, store, name, change):
    bad = os.path.join(tmp, name)
    shutil.copytree(store, bad)
    os.remove(os.path.join(bad, "LOCK"))
    change(bad)
    return bad


def main():
    if os.geteuid() != 0:
        print("skipped: needs root to run the producer as another user")
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="iotrace-store-integrity-")
    os.chmod(tmp, 0o755)
    store = make_store(tmp)
    segs = segments(store)
    check(len(segs) >= 3, f"only {len(segs)} segments")
    total, rc, err = events(store)
    check(total == BATCHES * PER and rc == 0 and "holds less" not in err,
          f"the whole store: {total} events, rc {rc}: {err}")
    mid = segs[len(segs) // 2]

    def cut(n):
        def f(bad):
            last = os.path.join(bad, segs[-1])
            os.truncate(last, os.path.getsize(last) - n)
        return f

    def boundary(bad):
        last = os.path.join(bad, segs[-1])
        os.truncate(last, record_ends(last)[0])

    def delete(seg):
        return lambda bad: os.remove(os.path.join(bad, seg))

    def flip(bad):
        path = os.path.join(bad, mid)
        with open(path, "r+b") as f:
            at = record_ends(path)[1] + 24 + 100  # inside the third record's batch
            f.seek(at)
            b = f.read(1)
            f.seek(at)
            f.write(bytes([b[0] ^ 0x10]))

    cases = [("cut-5000", cut(5000), "ends inside a record"),
             ("cut-at-boundary", boundary, "the store's manifest says"),
             ("first-deleted", delete(segs[0]), f"{segs[0]} is missing"),
             ("middle-deleted", delete(mid), f"{mid} is missing"),
             ("last-deleted", delete(segs[-1]), f"{segs[-1]} is missing"),
             ("bit-flipped", flip, "CRC mismatch")]
    for name, change, what in cases:
        bad = damaged(tmp, store, name, change)
        n, rc, err = events(bad)
        check(rc == 3 and what in err and "holds less than was stored" in err,
              f"{name} --jsonl: {total - n} of {total} events missing, rc {rc}, stderr {err[-600:]!r}")
        for mode in (["--stats"], ["--list-jobs"]):
            r = subprocess.run([EXPORT, "--store", bad] + mode, capture_output=True, text=True)
            check(r.returncode == 3 and what in r.stderr and r.stdout,
                  f"{name} {mode[0]}: rc {r.returncode}, stderr {r.stderr[-600:]!r}")
        r = subprocess.run([EXPORT, "--store", bad, "--verify"], capture_output=True, text=True)
        check(r.returncode == 1 and "verdict damaged" in r.stdout, f"{name} --verify: {r.stdout!r}")
        if name == "bit-flipped":
            check(n == total - PER, f"a flipped bit cost {total - n} events, not one batch's {PER}")
            log = os.path.join(tmp, "flipped-collector.log")
            with open(log, "wb") as f:
                c = subprocess.Popen([COLLECTOR, "--listen", f"tcp://127.0.0.1:{free_port()}", "--store", bad,
                                      "--http", "off"], stderr=f)
                started = until(lambda: "listening on" in open(log, errors="replace").read()
                                or c.poll() is not None, 30)
                text = open(log, errors="replace").read()
                check(started and c.poll() is None and "CRC mismatch" in text,
                      "the collector did not start on a store with one bad record, or did not say so:\n" + text)
                c.terminate()
                c.wait()
        print(f"{name}: {total - n} of {total} events missing, exit {rc}, reported: {what!r}")
    time.sleep(0)
    sys.exit(finish(tmp))


main()
