#!/usr/bin/env python3
"""What the collector's live analysis costs, and how live it is.

    bench-live.py BUILD_DIR [--events N] [--rate R] [--rounds K] [--steady S] [--busy]
                  [--windows MS] [--ingest-only]

1. Ingest cost, interleaved rounds: synthetic producers (MPI-IO calls with
   the POSIX calls inside them, tests/tools/iotrace-producer.c) push N events
   through an agent to the collector at a steady rate (events stamped
   with the real time, as a traced program's are), once with `--analysis off --http off`
   and once with the live analysis and HTTP on, alternating which goes
   first. Per run: the collector's CPU time (all threads, and the live
   thread alone, from /proc) once everything is stored and, with analysis
   on, analysed; events per CPU-second; wall time.  And the steady state:
   the collector's CPU (and the live thread's) from S seconds into the run
   (the merge and the matcher have filled their windows, the heap has its
   pages) until the producers stop, per event.  Medians over rounds and the
   ratio on/off: the target is that analysis costs at most 25 % of ingest
   throughput per core (ratio >= 0.75).
2. Liveness: a producer sends events stamped with the real time at a steady
   rate for 8 s; every 200 ms the newest call in /api/v1/jobs/JOB/timeline
   (released by the merge, so in the statistics) is compared with the time
   of the query. The lag minus --lateness (2 s) is what the pipeline adds.
   Then again with a second process of the job that sends one batch first
   and then nothing (a rank that does no I/O), which holds the watermark
   back until it counts as idle: with the default --producer-idle, and with
   10 s.
3. HTTP clients that never read: the ingest rate with 30 of them hanging
   on the collector and without, analysis on.
4. Memory per running job: the collector's peak RSS with 1 job and with 9
   jobs sharing the same low event rate, analysis on.

--busy runs a CPU-bound process on one core throughout (the machine has 2).
--ingest-only runs part 1 alone.
"""
import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import free_port, thread_cpu, thread_stats  # noqa: E402

def cpu_s(pid, thread_name=None):
    t = thread_cpu(pid)
    return sum(t.values()) if thread_name is None else t.get(thread_name, 0.0)


def minor_faults(pid, thread_name):
    """Minor page faults of the process's threads of that name, from /proc."""
    return sum(int(fields[7]) for name, fields in thread_stats(pid) if name == thread_name)


def rss_kib(pid, key="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return json.loads(r.read())


WINDOW_ARGS = []  # --lateness/--grace for the collector (--windows)


class Stack:
    def __init__(self, build, tmp, analysis, extra=()):
        self.build, self.tmp = build, tmp
        self.port, self.hport = free_port(), free_port()
        self.sock = os.path.join(tmp, "agent.sock")
        args = [f"{build}/collector/iotrace-collector", "--listen", f"tcp://127.0.0.1:{self.port}",
                "--store", os.path.join(tmp, "store"), "--log-level", "warn"]
        # --analysis-yield 0: what is measured is the analysis' CPU per event
        # as it keeps pace, also with --busy (where, with the default, it
        # could wait for the busy loop to end).
        args += (["--http", f"127.0.0.1:{self.hport}", "--analysis-yield", "0"] + WINDOW_ARGS
                 + list(extra) if analysis
                 else ["--analysis", "off", "--http", "off"])
        self.collector = subprocess.Popen(args, stderr=open(os.path.join(tmp, "c.log"), "w"))
        self.agent = subprocess.Popen(
            [f"{build}/agent/iotrace-agent", "--collector", f"tcp://127.0.0.1:{self.port}",
             "--listen", "ipc://" + self.sock, "--node", "bench", "--drain-timeout", "120s"],
            stderr=open(os.path.join(tmp, "a.log"), "w"))
        deadline = time.time() + 20
        while not os.path.exists(self.sock) or "welcomed" not in open(os.path.join(tmp, "a.log")).read():
            if time.time() > deadline:
                raise RuntimeError("agent did not connect")
            time.sleep(0.02)

    def produce(self, job, rank, batches, per_batch, extra=()):
        return subprocess.Popen([f"{self.build}/tests/iotrace-producer", "--agent", "ipc://" + self.sock,
                                 "--node", "bench", "--job", job, "--rank", str(rank), "--batches",
                                 str(batches), "--events-per-batch", str(per_batch), *extra],
                                stdout=subprocess.DEVNULL)

    def drain_agent(self):
        self.agent.send_signal(signal.SIGTERM)
        self.agent.wait(timeout=180)

    def analysed(self):
        st = get(self.hport, "/api/v1/status")
        return st["analysis_batches"] >= st["batches_stored"]

    def stop(self):
        for p in (self.agent, self.collector):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=60)


def hang_clients(port, n):
    """HTTP clients that never read: event streams left unread, requests sent
    half, connections left silent."""
    socks = []
    for i in range(n):
        try:
            s = socket.create_connection(("127.0.0.1", port))
        except OSError:
            break
        if i % 3 == 0:
            s.sendall(b"GET /api/v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
        elif i % 3 == 1:
            s.sendall(b"GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\n")
        socks.append(s)
    return socks


def ingest_run(build, events, analysis, jobs=1, rate=1_000_000, hang=0, warmup=0.0):
    with tempfile.TemporaryDirectory(prefix="iotrace-bench-live-") as tmp:
        s = Stack(build, tmp, analysis)
        try:
            per_batch = 4096
            batches = max(1, events // per_batch // jobs)
            hung = hang_clients(s.hport, hang) if analysis and hang else []
            c0 = cpu_s(s.collector.pid)
            t0 = time.time()
            # Stamped with the real time, as a traced program's are: the
            # merge then holds what --lateness says, not the whole run.
            prods = [s.produce(f"bench-{k}", k, batches, per_batch,
                               ["--realtime", "--rate", str(rate // jobs)])
                     for k in range(jobs)]
            steady = None
            if warmup:
                # The steady state: from `warmup` seconds in (the merge and
                # the matcher have filled their windows and the heap its
                # pages) until the producers stop.
                time.sleep(warmup)
                w0 = (time.time(), cpu_s(s.collector.pid), cpu_s(s.collector.pid, "iot-live"),
                      minor_faults(s.collector.pid, "iot-live"))
            for p in prods:
                p.wait()
            if warmup:
                w1 = (time.time(), cpu_s(s.collector.pid), cpu_s(s.collector.pid, "iot-live"),
                      minor_faults(s.collector.pid, "iot-live"))
                n_w = rate * (w1[0] - w0[0])  # the producers keep the rate
                steady = {"ns": (w1[1] - w0[1]) * 1e9 / n_w, "live_ns": (w1[2] - w0[2]) * 1e9 / n_w,
                          "seconds": w1[0] - w0[0], "faults": (w1[3] - w0[3]) * 1000 / n_w}
            s.drain_agent()
            stored = time.time() - t0  # everything stored and acknowledged
            while analysis and not s.analysed():
                time.sleep(0.01)
            wall = time.time() - t0
            cpu = cpu_s(s.collector.pid) - c0
            live = cpu_s(s.collector.pid, "iot-live") if analysis else 0.0
            rss = rss_kib(s.collector.pid, "VmHWM")
            for h in hung:
                h.close()
            n = batches * per_batch * jobs
            return {"events": n, "cpu": cpu, "live": live, "wall": wall, "rss": rss,
                    "ingest_rate": n / stored, "steady": steady,
                    "per_core": n / cpu if cpu else float("inf")}
        finally:
            s.stop()


def liveness(build, seconds=8.0, rate=20000, silent=False, extra=()):
    """With silent, a second process of the job sends one batch first and
    then nothing while the other streams (a rank that does no I/O), holding
    the watermark back until it counts as idle (--producer-idle)."""
    with tempfile.TemporaryDirectory(prefix="iotrace-bench-live-") as tmp:
        s = Stack(build, tmp, True, extra)
        try:
            per_batch = 512
            batches = int(seconds * rate / per_batch)
            quiet = (s.produce("lag", 1, 1, 2, ["--realtime", "--linger", str(int(seconds) + 5)])
                     if silent else None)
            p = s.produce("lag", 0, batches, per_batch, ["--realtime", "--rate", str(rate)])
            lags = []
            time.sleep(3)
            while p.poll() is None:
                now = time.time()
                try:
                    tl = get(s.hport, "/api/v1/jobs/lag/timeline")
                except OSError:
                    tl = None
                if tl and tl["calls"]:
                    newest = tl["origin_s"] + max(c["end_s"] for c in tl["calls"])
                    lags.append(now - newest)
                time.sleep(0.2)
            if quiet:
                quiet.kill()
                quiet.wait()
            return lags
        finally:
            s.stop()


def job_memory(build, jobs=9):
    """The live state of running jobs, as the collector accounts for it."""
    with tempfile.TemporaryDirectory(prefix="iotrace-bench-live-") as tmp:
        s = Stack(build, tmp, True)
        try:
            prods = [s.produce(f"mem-{k}", k, 20, 1024, ["--realtime", "--rate", "5000"])
                     for k in range(jobs)]
            time.sleep(3)
            st = get(s.hport, "/api/v1/status")
            stats = [len(json.dumps(get(s.hport, f"/api/v1/jobs/mem-{k}/stats"))) for k in range(jobs)]
            for p in prods:
                p.kill()
            st["stats_per_job"] = statistics.median(stats)  # the JSON; the figures are smaller
            return st
        finally:
            s.stop()


def busy_loop():
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rate", type=int, default=1_000_000,
                    help="events per second the producers send at (default 1000000)")
    ap.add_argument("--busy", action="store_true")
    ap.add_argument("--steady", type=float, default=5.0, metavar="S",
                    help="measure the steady state from S seconds into each run (default 5; "
                         "runs must be longer: --events / --rate)")
    ap.add_argument("--ingest-only", action="store_true",
                    help="run part 1 alone (the on/off rounds), e.g. to pair two builds")
    ap.add_argument("--windows", type=int, metavar="MS",
                    help="the live analysis's --lateness and --grace (default: the collector's, 2000)")
    a = ap.parse_args()
    if a.windows is not None:
        WINDOW_ARGS.extend(["--lateness", str(a.windows), "--grace", str(a.windows)])
    hog = busy_loop() if a.busy else None
    try:
        print(f"bench-live: {a.events} events per run at {a.rate} events/s, {a.rounds} interleaved rounds, "
              f"windows {a.windows if a.windows is not None else 2000} ms, "
              f"load average {os.getloadavg()[0]:.2f}, {'one core busy' if a.busy else 'idle machine'}")
        res = {False: [], True: []}
        for r in range(a.rounds):
            for analysis in ((False, True) if r % 2 == 0 else (True, False)):
                x = ingest_run(a.build, a.events, analysis, rate=a.rate,
                               warmup=a.steady if a.events / a.rate > a.steady + 2 else 0.0)
                res[analysis].append(x)
                st = x["steady"]
                print(f"  round {r + 1} analysis {'on ' if analysis else 'off'}: "
                      + (f"steady {st['ns']:.0f} ns of collector CPU per event (live thread "
                         f"{st['live_ns']:.0f} ns, {st['faults']:.1f} page faults per 1000 events) "
                         f"over {st['seconds']:.1f} s; " if st else "")
                      + f"whole run {x['per_core'] / 1e6:.3f} M events per CPU-second "
                      f"(collector CPU {x['cpu']:.2f} s, live thread {x['live']:.2f} s, "
                      f"stored and acknowledged at {x['ingest_rate'] / 1e6:.3f} M events/s, "
                      f"analysed after {x['wall']:.2f} s, peak RSS {x['rss'] / 1024:.1f} MiB)")
        med = {k: statistics.median(x["per_core"] for x in v) for k, v in res.items()}
        ns = {k: 1e9 / v for k, v in med.items()}
        print(f"median over whole runs (from start, windows filling): events per collector CPU-second: off {med[False] / 1e6:.3f} M "
              f"({ns[False]:.0f} ns/event), on {med[True] / 1e6:.3f} M ({ns[True]:.0f} ns/event); "
              f"ratio on/off {med[True] / med[False]:.3f}")
        if all(x["steady"] for v in res.values() for x in v):
            sn = {k: statistics.median(x["steady"]["ns"] for x in v) for k, v in res.items()}
            sl = statistics.median(x["steady"]["live_ns"] for x in res[True])
            print(f"median steady state (from {a.steady:g} s into each run until the producers stop): "
                  f"collector CPU per event off {sn[False]:.0f} ns, on {sn[True]:.0f} ns "
                  f"(live thread {sl:.0f} ns); throughput per core on/off {sn[False] / sn[True]:.3f}")
        rate = {k: statistics.median(x["ingest_rate"] for x in v) for k, v in res.items()}
        print(f"median ingest rate (stored and acknowledged, wall clock): off {rate[False] / 1e6:.3f} M "
              f"events/s, on {rate[True] / 1e6:.3f} M events/s; ratio {rate[True] / rate[False]:.3f}")
        print(f"median time until analysed: off {statistics.median(x['wall'] for x in res[False]):.2f} s, "
              f"on {statistics.median(x['wall'] for x in res[True]):.2f} s")
        if a.ingest_only:
            return
        slow = {0: [], 30: []}
        for r in range(3):
            for hang in ((0, 30) if r % 2 == 0 else (30, 0)):
                slow[hang].append(ingest_run(a.build, a.events // 2, True, rate=a.rate, hang=hang))
        q = {k: statistics.median(x["ingest_rate"] for x in v) for k, v in slow.items()}
        print(f"HTTP clients that never read (30: unread event streams, half requests, silent "
              f"connections), 3 interleaved rounds: ingest rate {q[0] / 1e6:.3f} M events/s "
              f"without, {q[30] / 1e6:.3f} M events/s with them; ratio {q[30] / q[0]:.3f}")
        for what, kw in (("", {}),
                         (", a second process silent after its first batch", {"silent": True}),
                         (", the same with --producer-idle 10000 (as before it existed)",
                          {"silent": True, "extra": ["--producer-idle", "10000"]})):
            lags = liveness(a.build, **kw)
            if lags:
                print(f"liveness{what}: newest call in /timeline behind the query by median "
                      f"{statistics.median(lags):.3f} s, max {max(lags):.3f} s over {len(lags)} "
                      f"queries (--lateness 2 s: {statistics.median(lags) - 2:.3f} s beyond it)")
            else:
                print(f"liveness{what}: no call in /timeline in any query of the 8-s run")
        mem = job_memory(a.build)
        print(f"memory per running job: {mem['job_view_bytes'] / max(1, mem['job_views']) / 1024:.0f} KiB "
              f"of live view (timeline, series) and {mem['stats_per_job'] / 1024:.1f} KiB of statistics "
              f"({mem['job_views']} jobs running); the merge and the matcher hold "
              f"{mem['analysis_bytes'] / 2**20:.1f} MiB for {mem['analysis_events_held']} events in flight")
    finally:
        if hog:
            hog.kill()


if __name__ == "__main__":
    main()
