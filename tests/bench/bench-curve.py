#!/usr/bin/env python3
"""What CURVE costs on the agent -> collector hop.

    bench-curve.py BUILD_DIR [--events N] [--rounds K] [--busy]

Per round, interleaved: the real collector and agent on loopback, once plain
and once with CURVE (keys from --keygen, the agent's listed in
--curve-clients), and the synthetic producer pushing N events in batches of
4096 as fast as the agent takes them. A run ends when the agent has every
batch acknowledged (stored and synced). Prints, per mode, the median over
the rounds of events/s (wall clock, producer start to the last
acknowledgement) and of the agent's and the collector's CPU time per event
(from /proc), and the ratios CURVE / plain. --busy keeps one core busy with
a spinning process meanwhile."""
import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import free_port, thread_cpu  # noqa: E402

PER_BATCH = 4096


def cpu_s(pid):
    return sum(thread_cpu(pid).values())


def one_run(bins, tmp, events, curve):
    d = tempfile.mkdtemp(dir=tmp)
    port = free_port()
    copt, aopt = [], []
    if curve:
        keys, clients = os.path.join(tmp, "keys"), os.path.join(tmp, "clients")
        copt = ["--curve-key", os.path.join(keys, "collector"), "--curve-clients", clients]
        aopt = ["--curve-key", os.path.join(keys, "agent"), "--collector-key",
                os.path.join(keys, "collector.pub")]
    coll = subprocess.Popen([bins["collector"], "--listen", f"tcp://127.0.0.1:{port}", "--store",
                             os.path.join(d, "store"), "--http", "off", "--analysis", "off"] + copt,
                            stderr=subprocess.DEVNULL)
    alog = os.path.join(d, "agent.log")
    agent = subprocess.Popen([bins["agent"], "--collector", f"tcp://127.0.0.1:{port}", "--listen",
                              "ipc://" + os.path.join(d, "a.sock"), "--node", "bench", "--state-dir", "none",
                              "--clock-interval", "0", "--stats-interval", "0.05s"] + aopt,
                             stderr=open(alog, "w"))
    while "welcomed us" not in open(alog).read():
        time.sleep(0.02)
    batches = events // PER_BATCH
    t0 = time.time()
    subprocess.run([bins["producer"], "--agent", "ipc://" + os.path.join(d, "a.sock"), "--node", "bench",
                    "--job", "bench", "--batches", str(batches), "--events-per-batch", str(PER_BATCH)],
                   check=True, stdout=subprocess.DEVNULL)
    pattern = re.compile(rf"acked={batches} .*pending=0 ")
    while not pattern.search(open(alog).read()):
        time.sleep(0.01)
    wall = time.time() - t0
    a_cpu, c_cpu = cpu_s(agent.pid), cpu_s(coll.pid)
    for p in (agent, coll):
        p.send_signal(signal.SIGTERM)
        p.wait()
    shutil.rmtree(d)
    n = batches * PER_BATCH
    return n / wall, a_cpu / n * 1e9, c_cpu / n * 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--events", type=int, default=4_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--busy", action="store_true")
    o = ap.parse_args()
    b = o.build
    bins = {"collector": f"{b}/collector/iotrace-collector", "agent": f"{b}/agent/iotrace-agent",
            "producer": f"{b}/tests/iotrace-producer"}
    tmp = tempfile.mkdtemp(prefix="iotrace-bench-curve-")
    os.makedirs(os.path.join(tmp, "keys"))
    os.makedirs(os.path.join(tmp, "clients"))
    subprocess.run([bins["collector"], "--keygen", os.path.join(tmp, "keys", "collector")], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run([bins["agent"], "--keygen", os.path.join(tmp, "keys", "agent")], check=True,
                   stdout=subprocess.DEVNULL)
    # Bound to the agents' node by its name (docs/transport.md, "Keys and nodes").
    shutil.copy(os.path.join(tmp, "keys", "agent.pub"), os.path.join(tmp, "clients", "bench.pub"))
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if o.busy else None
    print(f"bench-curve: {o.events} events per run, {o.rounds} interleaved rounds, "
          f"load {os.getloadavg()[0]:.2f}{', one core busy' if o.busy else ''}")
    res = {False: [], True: []}
    try:
        for r in range(o.rounds):
            for curve in (False, True):
                res[curve].append(one_run(bins, tmp, o.events, curve))
                rate, a, c = res[curve][-1]
                print(f"  round {r + 1} {'curve' if curve else 'plain'}: {rate / 1e6:.3f} M events/s, "
                      f"agent {a:.1f} ns/event, collector {c:.1f} ns/event")
    finally:
        if busy:
            busy.kill()
        shutil.rmtree(tmp)
    med = {k: [statistics.median(x[i] for x in v) for i in range(3)] for k, v in res.items()}
    for k in (False, True):
        print(f"{'curve' if k else 'plain'}: median {med[k][0] / 1e6:.3f} M events/s, agent "
              f"{med[k][1]:.1f} ns/event, collector {med[k][2]:.1f} ns/event")
    print(f"curve / plain: events/s {med[True][0] / med[False][0]:.3f}, agent CPU "
          f"{med[True][1] / med[False][1]:.2f}x, collector CPU {med[True][2] / med[False][2]:.2f}x")


if __name__ == "__main__":
    main()
