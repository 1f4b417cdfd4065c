#!/usr/bin/env python3
"""Events dropped at the rate a per-call loop makes them, on a node whose
cores the ranks take: bench_client (each rank ITERATIONS 8-byte
MPI_File_write_at, then as many pwrite) under mpiexec, with the agent and a
collector running its live analysis on the same cores, RUNS times; per run
the events stored and dropped (iotrace-export --list-jobs), and the load.

usage: bench-drops.py BUILD [--runs 10] [--ranks 2] [--calls 200000]
                            [--busy N] [--lib PATH] [--env VAR=VALUE ...]

--busy N adds N spinning processes for the runs' duration (a core taken
by other work); --lib traces with another build of libiotrace-client.so,
to compare; --env sets the library's variables (IOTRACE_OVERFLOW_MB=0:
as before full buffers were handed over)."""
import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--calls", type=int, default=200000)
    ap.add_argument("--busy", type=int, default=0)
    ap.add_argument("--lib")
    ap.add_argument("--env", action="append", default=[])
    a = ap.parse_args()
    b = os.path.abspath(a.build)
    lib = os.path.abspath(a.lib) if a.lib else os.path.join(b, "clientlib/libiotrace-client.so")
    tmp = tempfile.mkdtemp(prefix="iotrace-drops-")
    port, sock = free_port(), os.path.join(tmp, "agent.sock")
    logs = open(os.path.join(tmp, "daemons.log"), "ab")
    col = subprocess.Popen([os.path.join(b, "collector/iotrace-collector"), "--listen",
                            f"tcp://127.0.0.1:{port}", "--store", os.path.join(tmp, "store"),
                            "--http", f"127.0.0.1:{free_port()}"], stderr=logs)
    agent = subprocess.Popen([os.path.join(b, "agent/iotrace-agent"), "--collector",
                              f"tcp://127.0.0.1:{port}", "--listen", "ipc://" + sock,
                              "--state-dir", os.path.join(tmp, "state")], stderr=logs)
    while not os.path.exists(sock):
        time.sleep(0.05)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.busy)]
    extra = dict(v.split("=", 1) for v in a.env)
    shm = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        jobs = []
        for run in range(a.runs):
            job = f"drops-{run}"
            cmd = ["mpiexec", "-n", str(a.ranks), "-genv", "LD_PRELOAD", lib,
                   "-genv", "IOTRACE_AGENT", "ipc://" + sock, "-genv", "IOTRACE_JOB_ID", job]
            for k, v in extra.items():
                cmd += ["-genv", k, v]
            load = os.getloadavg()[0]
            subprocess.run(cmd + [os.path.join(b, "tests/bench_client"),
                                  os.path.join(shm, "f"), str(a.calls)],
                           check=True, capture_output=True)
            jobs.append((job, load))
        agent.send_signal(signal.SIGTERM)
        agent.wait(timeout=60)
        time.sleep(1)
        listing = subprocess.run([os.path.join(b, "collector/iotrace-export"), "--store",
                                  os.path.join(tmp, "store"), "--list-jobs"],
                                 capture_output=True, text=True, check=True).stdout
        total = lost_runs = 0
        for job, load in jobs:
            m = re.search(rf"^{job} .*events=(\d+) dropped=(\d+)", listing, re.M)
            stored, dropped = (int(m.group(1)), int(m.group(2))) if m else (0, -1)
            made = stored + max(dropped, 0)
            total += max(dropped, 0)
            lost_runs += dropped != 0
            print(f"{job}: stored {stored}, dropped {dropped} of {made} "
                  f"({100.0 * max(dropped, 0) / max(made, 1):.1f} %), load {load:.1f}")
        print(f"{a.runs} runs of {a.ranks} ranks x {a.calls} calls: {lost_runs} dropped events, "
              f"{total} in all; busy processes {a.busy}; library {lib}")
    finally:
        for p in busy:
            p.kill()
        for p in (agent, col):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=30)
        shutil.rmtree(shm, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
