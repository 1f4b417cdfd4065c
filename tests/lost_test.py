#!/usr/bin/env python3
"""Batches lost between a producer and the store are counted: the synthetic
producer hands every 4th batch over without sending it (as if its agent had
died with it in its socket); the real agent and collector store the rest,
and the export reports the missing events as drops of reason `lost`, in the
producer's job, so that stored + dropped = made."""
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import check, failures, free_port  # noqa: E402

COLLECTOR, AGENT, PRODUCER, EXPORT = sys.argv[1:5]
BATCHES, EVENTS, LOSE = 18, 100, 4


def main():
    tmp = tempfile.mkdtemp(prefix="iotrace-lost-")
    port = free_port()
    store, sock = os.path.join(tmp, "store"), "ipc://" + os.path.join(tmp, "agent.sock")
    log = open(os.path.join(tmp, "daemons.log"), "wb")
    c = subprocess.Popen([COLLECTOR, "--listen", f"tcp://127.0.0.1:{port}", "--store", store,
                          "--http", "off"], stderr=log)
    a = subprocess.Popen([AGENT, "--collector", f"tcp://127.0.0.1:{port}", "--listen", sock,
                          "--node", "n1", "--state-dir", "none"], stderr=log)
    try:
        while not os.path.exists(sock[6:]):
            time.sleep(0.05)
        out = subprocess.run([PRODUCER, "--agent", sock, "--node", "n1", "--job", "lostjob",
                              "--batches", str(BATCHES), "--events-per-batch", str(EVENTS),
                              "--lose", str(LOSE)], capture_output=True, text=True, check=True).stdout
        lost = int(out.split("lost_events=")[1].split()[0])
        want_lost = (BATCHES // LOSE) * EVENTS
        check(lost == want_lost, f"producer says {lost} lost, expected {want_lost}")
        stored_want = BATCHES * EVENTS - lost
        deadline = time.time() + 30
        while time.time() < deadline:
            r = subprocess.run([EXPORT, "--store", store, "--job", "lostjob", "--jsonl", "-"],
                               capture_output=True, text=True)
            events = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
            # A reader that reads the store while the last batches land may
            # see them in its event pass but not in its clock pass (which
            # tells it a producer's last batch), and report the loss on the
            # next read: wait for both.
            if sum(1 for e in events if e["kind"] != "drop") >= stored_want and \
                    sum(e["dropped"] for e in events if e["kind"] == "drop") >= lost:
                break
            time.sleep(0.2)
        stored = sum(1 for e in events if e["kind"] != "drop")
        drops = [e for e in events if e["kind"] == "drop"]
        check(stored == stored_want, f"stored {stored}, expected {stored_want}")
        # Reported once the producer's last stored batch has been read.
        check([d["reason"] for d in drops] == ["lost"], f"drop records: {drops}")
        check(sum(d["dropped"] for d in drops) == lost, f"lost counted {sum(d['dropped'] for d in drops)}")
        check("were handed over and never stored" in r.stderr, "export did not say so: " + r.stderr)
        jobs = subprocess.run([EXPORT, "--store", store, "--list-jobs"], capture_output=True,
                              text=True).stdout
        check(f"dropped={lost} " in jobs, "--list-jobs: " + jobs)
        stats = json.loads(subprocess.run([EXPORT, "--store", store, "--job", "lostjob", "--stats",
                                           "--format", "json"], capture_output=True, text=True).stdout)
        check(stats["jobs"][0]["dropped_events"] == lost, "--stats: %r" % stats["jobs"][0])
        print(f"made {BATCHES * EVENTS} events, stored {stored}, counted as lost {lost} in "
              f"{len(drops)} drop records")
    finally:
        a.terminate()
        c.terminate()
        a.wait()
        c.wait()
    if failures:
        sys.exit(1)
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
