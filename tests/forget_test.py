#!/usr/bin/env python3
"""A job that left the collector's memory (--keep) stays out of it.

The merge of the live analysis holds events behind its watermark, which a
producer that went silent holds back until it counts as idle
(--producer-idle, here 10 s of arrival time).  So a job can finish (--job-idle), have its final figures
computed from the store and leave memory (--keep) before the merge hands
over its last events.  Those events must not give the forgotten job a live
view (timeline and series, about 1.1 MiB) or statistics again, which
nothing would ever free: with short --keep settings every job of a
long-running collector stayed in memory that way.

Here a producer of job "holder" sends one batch and falls silent; a
producer of job "early" sends its batches right after.  "early" finishes
and is forgotten within about a second; once "holder" is idle the merge
releases everything.  Then no job may have a view, and "early" keeps only
its summary line.

Their processes then leave the live analysis too (name, files and slot),
the jobs' summaries keeping their counts; processes of later jobs take the
freed slots, so the collector's memory follows the processes running, not
every process it ever saw."""
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import check, finish, free_port, stop_all, until  # noqa: E402

COLLECTOR, AGENT, PRODUCER = sys.argv[1:4]


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return json.loads(r.read())


def up(port):
    """The HTTP server answers: the agent's socket may be there before it."""
    try:
        return get(port, "/api/v1/status")
    except OSError:  # refused, reset (urllib.error.URLError is one)
        return None


def forgotten(j):
    """Finished, and out of memory but for its summary line.

Their processes then leave the live analysis too (name, files and slot),
the jobs' summaries keeping their counts; processes of later jobs take the
freed slots, so the collector's memory follows the processes running, not
every process it ever saw."""
    return j["state"] == "finished" and not j["final_stats_in_memory"]


def job(port, name):
    return next((j for j in get(port, "/api/v1/jobs")["jobs"] if j["job"] == name), None)


def main():
    tmp = tempfile.mkdtemp(prefix="iotrace-forget-")
    port, hport = free_port(), free_port()
    sock = "ipc://" + os.path.join(tmp, "a.sock")
    log = open(os.path.join(tmp, "daemons.log"), "wb")
    c = subprocess.Popen([COLLECTOR, "--listen", f"tcp://127.0.0.1:{port}", "--store",
                          os.path.join(tmp, "store"), "--http", f"127.0.0.1:{hport}",
                          "--job-idle", "200", "--keep", "1", "--lateness", "500",
                          "--producer-idle", "10000",
                          "--analysis-yield", "0"], stderr=log)
    a = subprocess.Popen([AGENT, "--collector", f"tcp://127.0.0.1:{port}", "--listen", sock,
                          "--node", "n1", "--state-dir", "none"], stderr=log)
    try:
        until(lambda: os.path.exists(sock[6:]), 20)
        until(lambda: up(hport), 20)
        for name, rank, batches in (("holder", 0, 1), ("early", 1, 20)):
            subprocess.run([PRODUCER, "--agent", sock, "--node", "n1", "--job", name, "--rank",
                            str(rank), "--batches", str(batches), "--events-per-batch", "500",
                            "--realtime"], check=True, stdout=subprocess.DEVNULL, timeout=60)
        until(lambda: get(hport, "/api/v1/status")["batches_stored"] >= 21, 30)
        early = until(lambda: (j := job(hport, "early")) and forgotten(j) and j, 30)
        held = get(hport, "/api/v1/status")["analysis_events_held"]
        check(early and forgotten(early), f"'early' did not finish and leave memory: {early}")
        check(held > 0, "the merge held nothing back: the case is not made")
        st = until(lambda: (s := get(hport, "/api/v1/status"))["analysis_events_held"] == 0 and s,
                   40)
        time.sleep(1.5)  # a tick of the live thread after the release
        st = get(hport, "/api/v1/status")
        early = job(hport, "early")
        print(f"held {held} events while 'early' was forgotten; after the release: "
              f"{st['analysis_events_held']} held, {st['job_views']} job views, "
              f"'early' {early}")
        check(st["analysis_events_held"] == 0, f"the merge kept {st['analysis_events_held']} events")
        check(st["job_views"] == 0, f"{st['job_views']} job views after every job left memory")
        check(early and forgotten(early) and early["events"] == 10000,
              f"'early' after the release: {early}")
        with urllib.request.urlopen(f"http://127.0.0.1:{hport}/metrics", timeout=10) as r:
            series = [line for line in r.read().decode().splitlines() if 'job="early"' in line]
        check(not series, f"/metrics has series of the forgotten job: {series[:3]}")

        st = until(lambda: (s := get(hport, "/api/v1/status"))["analysis_producers_retired"] >= 2
                   and s, 20)
        check(st and st["analysis_producers_retired"] == 2,
              f"the two processes of the forgotten jobs were not retired: {st}")
        slots, kept = st["analysis_producer_slots"], st["analysis_producers"]
        early = job(hport, "early")
        check(early and early["processes"] == 1 and early["ranks"] == 1,
              f"'early' lost its counts when its process was retired: {early}")
        for name, rank in (("again-a", 0), ("again-b", 0)):
            subprocess.run([PRODUCER, "--agent", sock, "--node", "n1", "--job", name, "--rank",
                            str(rank), "--batches", "5", "--events-per-batch", "500",
                            "--realtime"], check=True, stdout=subprocess.DEVNULL, timeout=60)
        st = until(lambda: (s := get(hport, "/api/v1/status"))["analysis_producers_retired"] >= 4
                   and s, 40)
        print(f"after a second round: {st and st['analysis_producers_retired']} processes retired, "
              f"{st and st['analysis_producers']} in memory, "
              f"{st and st['analysis_producer_slots']} slots (were {slots})")
        check(st and st["analysis_producers_retired"] == 4,
              f"the second round's processes were not retired: {st}")
        check(st["analysis_producer_slots"] == slots and st["analysis_producers"] == kept,
              f"the second round took {st['analysis_producer_slots']} slots (were {slots}), "
              f"{st['analysis_producers']} in memory (were {kept})")
        again = [job(hport, n) for n in ("again-a", "again-b")]
        check(all(j and forgotten(j) and j["events"] == 2500 and j["processes"] == 1
                  for j in again), f"the second round's jobs: {again}")
    finally:
        stop_all([a, c])
    sys.exit(finish(tmp))


if __name__ == "__main__":
    main()
