#!/usr/bin/env python3
"""Where the CPU time of one traced event goes, component by component.

    bench-cost.py BUILD_DIR [--calls N] [--rounds K] [--busy] [--analysis on|off]
                  [--instructions CALLS [--keep DIR]] [--no-time]

A real collector (live analysis on, HTTP on loopback) and a real agent run
for the whole benchmark.  Each round runs tests/bench_client (N 8-byte
MPI_File_write_at to a file in /dev/shm, each with the pwrite ROMIO makes
inside it, then N pwrite; N/10 warm-up calls of each) once without the
library and once with it preloaded, alternating which goes first.  Per run:

  - the application thread and the whole traced process (the library's
    sender thread and its ZeroMQ I/O thread), from the process's own
    getrusage (RUSAGE_THREAD, RUSAGE_SELF) printed by bench_client;
  - the agent and the collector (its ingest threads and its live analysis
    thread apart), from /proc/PID/task/*/stat before the run and once the
    collector has stored and analysed everything and finished the job
    (--job-idle 1 s; its final statistics computed from the store);
  - the events the run stored (the collector's own count, /api/v1/status).

CPU per event of each component: the application thread's and the
process's extra threads' against the untraced run, the agent's and the
collector's in the traced run; medians over the rounds.  Compute node = the
application thread + the sender + the agent (target: <= 100 ns per event);
collector ingest (validate, deduplicate, store durably; target <= 100 ns).

--instructions CALLS also counts instructions (valgrind's callgrind; they
do not depend on the machine's load) with CALLS calls of each kind: the
agent and the collector each run under callgrind for one traced run of
bench_client, itself under callgrind (application thread and sender
thread apart), and once untraced for the application thread's baseline.
--keep DIR copies the callgrind files there (cg.traced-NN per thread of the
traced program, cg.agent-NN, cg.collector-NN), for callgrind_annotate.
--busy keeps one core busy with another process throughout.
--analysis off runs the collector without its live analysis (and HTTP), as
for a compute node whose collector runs elsewhere: the ranks then share
this machine with the agent and the collector's ingest only.  Events are
then counted by `iotrace-export --verify` of the store after each run.
"""
import argparse
import glob
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import free_port, thread_cpu  # noqa: E402

def process_cpu(pid):
    return sum(thread_cpu(pid).values())


def status(hport):
    with urllib.request.urlopen(f"http://127.0.0.1:{hport}/api/v1/status", timeout=10) as r:
        return json.loads(r.read())


class Stack:
    def __init__(self, build, work, wrap=lambda name: [], extra=()):
        self.work = work
        self.analysis = "off" not in extra
        port, self.hport = free_port(), free_port()
        self.sock = os.path.join(work, "agent.sock")
        self.collector = subprocess.Popen(
            [*wrap("collector"), f"{build}/collector/iotrace-collector", "--listen",
             f"tcp://127.0.0.1:{port}", "--store", os.path.join(work, "store"), "--http",
             f"127.0.0.1:{self.hport}", "--log-level", "warn", "--job-idle", "1000", *extra],
            stderr=open(os.path.join(work, "c.log"), "w"))
        self.agent = subprocess.Popen(
            [*wrap("agent"), f"{build}/agent/iotrace-agent", "--collector",
             f"tcp://127.0.0.1:{port}", "--listen", "ipc://" + self.sock],
            stderr=open(os.path.join(work, "a.log"), "w"))
        deadline = time.time() + 120
        while not (os.path.exists(self.sock) and "welcomed" in open(os.path.join(work, "a.log")).read()):
            if time.time() > deadline:
                raise RuntimeError("agent did not connect:\n" + open(os.path.join(work, "a.log")).read())
            time.sleep(0.05)

    def settled(self, timeout=600):
        """Waits until everything sent is stored and analysed and the job is
        finished (--job-idle 1 s: its final statistics computed); its status."""
        deadline, last = time.time() + timeout, None
        if not self.analysis:
            return self.quiet_store(deadline)
        while time.time() < deadline:
            st = status(self.hport)
            key = (st["events_stored"], st["analysis_batches"])
            done = (st["analysis_batches"] >= st["batches_stored"] and st["jobs_running"] == 0
                    if self.analysis else True)
            if done and key == last:
                return st
            last = key
            time.sleep(0.5)
        raise RuntimeError("the collector did not settle")

    def quiet_store(self, deadline):
        """Without the analysis (and so without HTTP): waits until the store
        has not grown for 1.5 s; its size."""
        last, quiet = None, 0
        while time.time() < deadline:
            size = sum(os.path.getsize(f) for f in glob.glob(os.path.join(self.work, "store", "*")))
            quiet = quiet + 1 if size == last else 0
            if quiet == 3:
                return {"bytes_stored": size}
            last = size
            time.sleep(0.5)
        raise RuntimeError("the store did not settle")

    def stop(self):
        for p in (self.agent, self.collector):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=300)


def run_client(build, work, calls, traced, sock, wrap=()):
    f = os.path.join(work, "f")
    if os.path.exists(f):
        os.remove(f)
    env = dict(os.environ)
    if traced:
        env.update(LD_PRELOAD=f"{build}/clientlib/libiotrace-client.so",
                   IOTRACE_AGENT="ipc://" + sock)
    r = subprocess.run([*wrap, f"{build}/tests/bench_client", f, str(calls)], env=env,
                       capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise RuntimeError(f"bench_client failed: {r.stderr}")
    return {k: float(v) for k, v in (line.split() for line in r.stdout.splitlines())}


def stored_events(build, s):
    """The events in the store: the collector's count, or without the
    analysis (and HTTP) what `iotrace-export --verify` finds."""
    if s.analysis:
        return status(s.hport)["events_stored"]
    r = subprocess.run([f"{build}/collector/iotrace-export", "--store", os.path.join(s.work, "store"),
                        "--verify"], capture_output=True, text=True, timeout=600)
    for line in r.stdout.splitlines():
        if line.startswith("events "):
            return int(line.split()[1])
    raise RuntimeError("iotrace-export --verify did not count events:\n" + r.stdout + r.stderr)


def timed(build, calls, rounds, analysis=True):
    work = tempfile.mkdtemp(prefix="iotrace-bench-cost-", dir="/dev/shm")
    s = Stack(build, work, extra=() if analysis else ("--analysis", "off", "--http", "off"))
    rows = []
    try:
        s.settled()
        for r in range(rounds):
            res = {}
            for traced in ((False, True) if r % 2 == 0 else (True, False)):
                e0 = stored_events(build, s)
                a0, c0 = process_cpu(s.agent.pid), thread_cpu(s.collector.pid)
                out = run_client(build, work, calls, traced, s.sock)
                s.settled()
                a1, c1 = process_cpu(s.agent.pid), thread_cpu(s.collector.pid)
                e1 = stored_events(build, s)
                live = c1.get("iot-live", 0) - c0.get("iot-live", 0)
                coll = sum(c1.values()) - sum(c0.values()) - live
                res[traced] = dict(out, events=e1 - e0,
                                   agent=a1 - a0, ingest=coll, live=live)
            t, u = res[True], res[False]
            n = t["events"]
            row = {
                "events": n,
                "app": (t["cpu_main_ns"] - u["cpu_main_ns"]) / n,
                "sender": ((t["cpu_process_ns"] - t["cpu_main_ns"])
                           - (u["cpu_process_ns"] - u["cpu_main_ns"])) / n,
                # From before the traced run until the job is finished: the
                # daemons' timers in those seconds are counted too.
                "agent": t["agent"] * 1e9 / n,
                "ingest": t["ingest"] * 1e9 / n,
                "live": t["live"] * 1e9 / n,
                "write_at": t["MPI_File_write_at_ns"] - u["MPI_File_write_at_ns"],
                "pwrite": t["pwrite_ns"] - u["pwrite_ns"],
            }
            row["node"] = row["app"] + row["sender"] + row["agent"]
            rows.append(row)
            print(f"  round {r + 1}: {n} events; ns per event: application thread {row['app']:.0f}, "
                  f"sender {row['sender']:.0f}, agent {row['agent']:.0f} (compute node "
                  f"{row['node']:.0f}); collector ingest {row['ingest']:.0f}, live analysis "
                  f"{row['live']:.0f}; wall ns added per MPI_File_write_at {row['write_at']:.0f}, "
                  f"per pwrite {row['pwrite']:.0f}", flush=True)
    finally:
        s.stop()
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(f"median of {rounds} rounds, CPU ns per stored event: application thread {med['app']:.0f} + "
          f"sender {med['sender']:.0f} + agent {med['agent']:.0f} = compute node {med['node']:.0f} "
          f"(target <= 100); collector ingest {med['ingest']:.0f} (target <= 100); live analysis "
          f"{med['live']:.0f}; wall ns added per call: MPI_File_write_at {med['write_at']:.0f}, "
          f"pwrite {med['pwrite']:.0f}")


def callgrind_total(path):
    with open(path) as f:
        for line in f:
            m = re.match(r"(summary|totals):\s*(\d+)", line)
            if m:
                return int(m.group(2))
    raise RuntimeError(f"no total in {path}")


def instructions(build, calls, keep=None):
    """Two passes, so that no more than one process runs under valgrind at a
    time: the traced program under callgrind with the daemons native, then
    the daemons under callgrind with the program native."""
    work = tempfile.mkdtemp(prefix="iotrace-bench-cost-cg-", dir="/dev/shm")

    def cg(name):
        return ["valgrind", "--tool=callgrind", "--separate-threads=yes",
                f"--callgrind-out-file={work}/cg.{name}"]

    def threads(name):
        return {os.path.basename(p): callgrind_total(p)
                for p in sorted(glob.glob(f"{work}/cg.{name}-*"))}

    s = Stack(build, work)
    try:
        s.settled()
        st0 = status(s.hport)
        run_client(build, work, calls, True, s.sock, wrap=cg("traced"))
        n1 = s.settled()["events_stored"] - st0["events_stored"]
        run_client(build, work, calls, False, s.sock, wrap=cg("untraced"))
    finally:
        s.stop()
    shutil.rmtree(os.path.join(work, "store"), ignore_errors=True)
    s = Stack(build, work, wrap=cg)
    try:
        s.settled()
        st0 = status(s.hport)
        run_client(build, work, calls, True, s.sock)
        n2 = s.settled()["events_stored"] - st0["events_stored"]
    finally:
        s.stop()
    traced, untraced = threads("traced"), threads("untraced")
    app = traced.get("cg.traced-01", 0) - untraced.get("cg.untraced-01", 0)
    sender = sum(v for k, v in traced.items() if not k.endswith("-01")) - \
        sum(v for k, v in untraced.items() if not k.endswith("-01"))
    # The daemons' counts include their start-up: small next to the events.
    # The collector's live analysis thread is the one that decodes stored
    # batches.
    agent = sum(threads("agent").values())
    coll = threads("collector")
    live = sum(v for k, v in coll.items()
               if "xp_feed_batch" in open(os.path.join(work, k), errors="replace").read())
    ingest = sum(coll.values()) - live
    print(f"instructions (callgrind, {calls} calls of each kind; {n1} and {n2} events stored) per "
          f"event: application thread {app / n1:.0f}, sender {sender / n1:.0f}, agent "
          f"{agent / n2:.0f}; collector ingest {ingest / n2:.0f}, live analysis {live / n2:.0f} "
          f"(the daemons' start-up included)")
    if keep:
        os.makedirs(keep, exist_ok=True)
        for p in glob.glob(f"{work}/cg.*"):
            shutil.copy(p, keep)
    shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--calls", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--busy", action="store_true")
    ap.add_argument("--analysis", choices=("on", "off"), default="on",
                    help="the collector's live analysis in the timed rounds (default on)")
    ap.add_argument("--instructions", type=int, metavar="CALLS", default=0)
    ap.add_argument("--keep", metavar="DIR", help="keep the callgrind files in DIR")
    ap.add_argument("--no-time", action="store_true", help="instruction counts only")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if a.busy else None
    try:
        print(f"bench-cost: {a.calls} calls of each kind per run, {a.rounds} interleaved rounds, "
              f"load average {os.getloadavg()[0]:.2f}, {'one core busy' if a.busy else 'idle machine'}, "
              f"live analysis {a.analysis}",
              flush=True)
        if not a.no_time:
            timed(build, a.calls, a.rounds, a.analysis == "on")
        if a.instructions:
            instructions(build, a.instructions, a.keep)
    finally:
        if hog:
            hog.kill()


if __name__ == "__main__":
    main()
