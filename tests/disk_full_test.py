#!/usr/bin/env python3
"""The collector on a full disk: it stays up, acknowledges nothing it could
not make durable, says so (log, /api/v1/status, /metrics), answers the
agent DEFERRED (which keeps its batches and sends them again after a
pause, without waiting out its credit timeout), and once there is room
again every batch the agent kept is stored exactly once.

The store is on a 2 MiB tmpfs mounted by the test (root; skipped, exit 77,
where mounting is not allowed), grown to 64 MiB while the collector runs.

    disk_full_test.py COLLECTOR AGENT PRODUCER EXPORT
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from testlib import check, finish, free_port, stop_all

COLLECTOR, AGENT, PRODUCER, EXPORT = sys.argv[1:5]
BATCHES, PER_BATCH = 300, 2000


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return r.read().decode()


def status(port):
    return json.loads(get(port, "/api/v1/status"))


def wait_for(what, cond, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.2)
    check(False, f"timed out waiting for {what}")
    return False


def main():
    tmp = tempfile.mkdtemp(prefix="iot-disk-full-")
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2M", "tmpfs", mnt],
                                           capture_output=True).returncode != 0:
        print("SKIP: cannot mount a tmpfs here (needs root)")
        shutil.rmtree(tmp)
        return 77
    procs = []
    try:
        store = os.path.join(mnt, "store")
        port, hport = free_port(), free_port()
        clog = os.path.join(tmp, "c.log")
        c = subprocess.Popen([COLLECTOR, "--listen", f"tcp://127.0.0.1:{port}", "--store", store,
                              "--http", f"127.0.0.1:{hport}", "--segment-size", "256K"],
                             stderr=open(clog, "w"))
        procs.append(c)
        sock = os.path.join(tmp, "a.sock")
        alog = os.path.join(tmp, "a.log")
        a = subprocess.Popen([AGENT, "--collector", f"tcp://127.0.0.1:{port}", "--listen",
                              "ipc://" + sock], stderr=open(alog, "w"))
        procs.append(a)
        wait_for("the agent to connect", lambda: "welcomed" in open(alog).read())
        p = subprocess.run([PRODUCER, "--agent", "ipc://" + sock, "--job", "fulljob", "--batches",
                            str(BATCHES), "--events-per-batch", str(PER_BATCH)],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 0 and "dropped_batches=0" in p.stdout, f"producer: {p.stdout} {p.stderr}")

        wait_for("the store to be full", lambda: status(hport)["store_full"])
        st = status(hport)
        check(c.poll() is None, "the collector exited on a full disk")
        check(st["deferred_batches"] > 0 and st["batches_stored"] < BATCHES,
              f"full store: {st}")
        log = open(clog).read()
        check("No space left on device: batches are not acknowledged until there is room again"
              in log, "full disk not logged:\n" + log)
        metrics = get(hport, "/metrics")
        check("iotrace_collector_store_full 1" in metrics.splitlines(), "store_full not in /metrics")
        stored_while_full = st["events_stored"]
        # The collector answers DEFERRED: the agent keeps the batches and
        # sends them again after 1, 2, 4 s; nothing more is stored.
        wait_for("the agent to be told", lambda: "has no room in its store" in open(alog).read())
        time.sleep(3)
        check(status(hport)["events_stored"] == stored_while_full,
              "events were stored while the disk was full")

        subprocess.run(["mount", "-o", "remount,size=64M", mnt], check=True)
        want = BATCHES * PER_BATCH
        wait_for("every batch to be stored",
                 lambda: status(hport)["events_stored"] >= want and not status(hport)["store_full"])
        check("store: writing again after" in open(clog).read(), "recovery not logged")
        alog_text = open(alog).read()
        check("stores again" in alog_text, "the agent did not log the end of the deferral")
        # Resent on the collector's answer, not after the credit timeout
        # (30 s, which would outlast a short outage).
        check("reconnecting" not in alog_text, "the agent waited out its credit timeout:\n" + alog_text)
        check("iotrace_collector_store_full 0" in get(hport, "/metrics").splitlines(),
              "store_full still set in /metrics")
        for proc in (a, c):
            proc.send_signal(signal.SIGTERM)
            check(proc.wait(timeout=60) == 0, f"{proc.args[0]} exit code {proc.returncode}")
        v = subprocess.run([EXPORT, "--store", store, "--verify"], capture_output=True, text=True)
        check(v.returncode == 0 and "verdict ok" in v.stdout and "end complete" in v.stdout,
              f"--verify after the full disk: {v.stdout} {v.stderr}")
        j = subprocess.run([EXPORT, "--store", store, "--list-jobs", "--job", "fulljob"],
                           capture_output=True, text=True)
        check(j.stdout.startswith(f"fulljob ranks=1 nodes=1 events={want} dropped=0 "),
              f"every event exactly once: {j.stdout!r}")
    finally:
        stop_all(procs)
        subprocess.run(["umount", mnt], capture_output=True)
    return finish(tmp)


if __name__ == "__main__":
    sys.exit(main())
