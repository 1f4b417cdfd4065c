#!/usr/bin/env python3
"""The live analysis is live by default, and waits for a core to spare
only when asked to (--analysis-yield).

With a busy loop on every core and the collector's defaults, the live
analysis keeps up with a synthetic producer: it has read every stored batch
(analysis_behind_batches 0) and never waited.  With --analysis-yield 30 the
batches are stored and acknowledged at once, but the live analysis leaves
them in the store (/api/v1/status: analysis_waiting, analysis_behind_batches
and analysis_lag_s, which the dashboard's banner shows) until the loops
stop; then it reads them all, and the time it waited is in the status and
in /metrics.  With --analysis-yield 0 it keeps up as with the defaults.
Skipped (77) where /proc/stat does not describe the cores this process may
use (a container with a CPU quota or a narrower CPU set): the collector
could not see that they are all busy."""
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import BusyCores, check, failures, free_port, until  # noqa: E402

COLLECTOR, AGENT, PRODUCER = sys.argv[1:4]
BATCHES, EVENTS = 40, 500


def usable_cores():
    """Cores this process may run on, if /proc/stat is about the same ones."""
    with open("/proc/stat") as f:
        listed = sum(1 for line in f if line.startswith("cpu") and line[3].isdigit())
    mine = len(os.sched_getaffinity(0))
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()
        if quota != "max" and int(quota) < int(period) * mine:
            return None
    except OSError:
        pass
    return mine if mine == listed else None


def status(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/status", timeout=10) as r:
        return json.loads(r.read())


def metric(port, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return None


def caught_up(hport):
    s = status(hport)
    return s["analysis_batches"] >= s["batches_stored"] and s["analysis_behind_batches"] == 0


def run(tmp, yield_s, cores):
    """Produces under a busy loop per core, with --analysis-yield yield_s
    (None: the collector's default); (status while busy, status after)."""
    name = "default" if yield_s is None else str(yield_s)
    port, hport = free_port(), free_port()
    store, sock = os.path.join(tmp, f"store-{name}"), "ipc://" + os.path.join(tmp, f"a{name}.sock")
    log = open(os.path.join(tmp, f"daemons-{name}.log"), "wb")
    c = subprocess.Popen([COLLECTOR, "--listen", f"tcp://127.0.0.1:{port}", "--store", store,
                          "--http", f"127.0.0.1:{hport}"]
                         + ([] if yield_s is None else ["--analysis-yield", str(yield_s)]),
                         stderr=log)
    a = subprocess.Popen([AGENT, "--collector", f"tcp://127.0.0.1:{port}", "--listen", sock,
                          "--node", "n1", "--state-dir", "none"], stderr=log)
    busy = BusyCores(cores)
    try:
        until(lambda: os.path.exists(sock[6:]), 20)
        until(lambda: status(hport), 20)
        busy.__enter__()
        time.sleep(1.5)  # the collector's measure covers the busy cores
        subprocess.run([PRODUCER, "--agent", sock, "--node", "n1", "--job", f"busy{name}",
                        "--batches", str(BATCHES), "--events-per-batch", str(EVENTS)],
                       check=True, stdout=subprocess.DEVNULL, timeout=120)
        until(lambda: status(hport)["batches_stored"] >= BATCHES, 30)
        if yield_s:
            # Waiting: what it leaves unread grows older.
            until(lambda: status(hport)["analysis_lag_s"] >= 2, 30)
        else:
            # Live: what it needs is to have read what was stored, under load.
            until(lambda: caught_up(hport), 30)
        during = status(hport)
        # No batch after these: the agent's own (clock samples, counters)
        # would each start a new wait while anything else on the machine
        # keeps its cores busy, which a test cannot rule out.
        a.terminate()
        a.wait()
        settled = []

        def stored_settled():  # the same count for a second
            settled.append((time.time(), status(hport)["batches_stored"]))
            before = [n for t, n in settled if t <= settled[-1][0] - 1.0]
            return before and before[-1] == settled[-1][1]
        until(stored_settled, 30)
        busy.__exit__()
        # Free cores let it read at once; a machine kept busy by others, at
        # the latest when its wait of yield_s seconds is over.
        until(lambda: caught_up(hport), 30 + (yield_s or 0))
        after = status(hport)
        after["wait_metric"] = metric(hport, "iotrace_analysis_wait_seconds_total")
        after["lag_metric"] = metric(hport, "iotrace_analysis_lag_seconds")
        return during, after
    finally:
        busy.__exit__()
        a.terminate()
        c.terminate()
        a.wait()
        c.wait()


def main():
    cores = usable_cores()
    if not cores:
        print("skipped: /proc/stat does not describe the cores this process may use")
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="iotrace-yield-")
    during, after = run(tmp, None, cores)
    print(f"defaults, {cores} busy loops: stored {during['batches_stored']} batches, analysed "
          f"{during['analysis_batches']} ({during['analysis_events']} events) while busy, "
          f"behind {during['analysis_behind_batches']}, waited {after['analysis_wait_s']} s, "
          f"--analysis-yield {during['analysis_yield_s']}")
    check(during["analysis_yield_s"] == 0, "the default --analysis-yield is not 0")
    check(during["analysis_batches"] >= during["batches_stored"] and
          during["analysis_behind_batches"] == 0,
          "with the defaults the analysis fell behind under load")
    check(not during["analysis_waiting"] and after["analysis_wait_s"] == 0,
          "with the defaults the analysis waited")

    during, after = run(tmp, 30, cores)
    print(f"--analysis-yield 30, {cores} busy loops: stored {during['batches_stored']} batches, "
          f"analysed {during['analysis_batches']}, waiting {during['analysis_waiting']}; after "
          f"the loops stopped: analysed {after['analysis_batches']}, waited "
          f"{after['analysis_wait_s']:.1f} s (metric {after['wait_metric']}); behind while "
          f"waiting: {during['analysis_behind_batches']} batches, {during['analysis_lag_s']:.1f} s")
    check(during["batches_stored"] >= BATCHES, f"stored {during['batches_stored']} batches")
    check(during["analysis_waiting"], "the analysis did not wait with every core busy")
    check(during["analysis_batches"] < during["batches_stored"],
          "the analysis read the batches while every core was busy")
    check(during["analysis_behind_batches"] >= BATCHES and during["analysis_lag_s"] >= 2,
          f"waiting, the status says {during['analysis_behind_batches']} batches and "
          f"{during['analysis_lag_s']} s behind")
    check(after["analysis_behind_batches"] == 0 and after["analysis_lag_s"] == 0 and
          after["lag_metric"] == 0, f"caught up, the status says {after['analysis_behind_batches']} "
          f"batches and {after['analysis_lag_s']} s behind (metric {after['lag_metric']})")
    check(after["analysis_batches"] >= after["batches_stored"] and not after["analysis_waiting"],
          f"the analysis did not catch up once the cores were free: {after}")
    check(after["analysis_wait_s"] >= 1.0, f"waited {after['analysis_wait_s']} s")
    check(after["wait_metric"] is not None and after["wait_metric"] >= 1.0,
          f"iotrace_analysis_wait_seconds_total {after['wait_metric']}")

    during, after = run(tmp, 0, cores)
    print(f"--analysis-yield 0: stored {during['batches_stored']} batches, analysed "
          f"{during['analysis_batches']} while busy, waited {after['analysis_wait_s']} s")
    check(during["analysis_batches"] >= during["batches_stored"],
          "with --analysis-yield 0 the analysis fell behind under load")
    check(not during["analysis_waiting"] and after["analysis_wait_s"] == 0,
          "with --analysis-yield 0 the analysis waited")
    if failures:
        sys.exit(1)
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
