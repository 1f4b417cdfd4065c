"""Starts a real iotrace collector and agent on loopback for a test, and
runs programs with libiotrace-client preloaded under mpiexec."""
import json
import os
import signal
import socket
import subprocess
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Deployment:
    def __init__(self, bins, node="testnode"):
        self.bins = bins
        self.tmp = tempfile.mkdtemp(prefix="iotrace-test-")
        self.store = os.path.join(self.tmp, "store")
        self.sock = os.path.join(self.tmp, "agent.sock")
        self.endpoint = "ipc://" + self.sock
        self.port = free_port()
        self.node = node
        self.collector = self.agent = None

    def log(self, name):
        return open(os.path.join(self.tmp, name + ".log"), "ab")

    def start_collector(self):
        self.collector = subprocess.Popen(
            [self.bins["collector"], "--listen", f"tcp://127.0.0.1:{self.port}", "--store", self.store],
            stderr=self.log("collector"))

    def start_agent(self):
        self.agent = subprocess.Popen(
            [self.bins["agent"], "--collector", f"tcp://127.0.0.1:{self.port}",
             "--listen", self.endpoint, "--node", self.node],
            stderr=self.log("agent"))
        deadline = time.time() + 10
        while not os.path.exists(self.sock):
            if time.time() > deadline or self.agent.poll() is not None:
                raise RuntimeError("agent did not come up: " + self.logs())
            time.sleep(0.05)

    def start(self):
        self.start_collector()
        self.start_agent()
        return self

    def stop(self):
        for p in (self.agent, self.collector):
            if p and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                    raise RuntimeError("a daemon ignored SIGTERM")

    def logs(self):
        out = []
        for name in ("collector", "agent"):
            path = os.path.join(self.tmp, name + ".log")
            if os.path.exists(path):
                out.append(f"--- {name} ---\n" + open(path, errors="replace").read()[-4000:])
        return "\n".join(out)

    def export(self, job=None):
        cmd = [self.bins["export"], "--store", self.store, "--jsonl", "-"]
        if job:
            cmd += ["--job", job]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def wait_for(self, predicate, job=None, timeout=30):
        """Polls the store until predicate(events) holds; returns the events."""
        deadline = time.time() + timeout
        events = []
        while time.time() < deadline:
            if os.path.isdir(self.store):
                try:
                    events = self.export(job)
                except subprocess.CalledProcessError:
                    events = []
                if predicate(events):
                    return events
            time.sleep(0.3)
        raise AssertionError("events did not arrive in time; last count %d\n%s" % (len(events), self.logs()))


def mpirun(bins, nprocs, argv, env=None, preload=True, timeout=120):
    cmd = [bins["mpiexec"], "-n", str(nprocs)]
    if preload:
        cmd += ["-genv", "LD_PRELOAD", bins["preload_prefix"] + bins["client"]]
        if bins["preload_prefix"]:
            cmd += ["-genv", "ASAN_OPTIONS", "detect_leaks=0:verify_asan_link_order=0"]
    for k, v in (env or {}).items():
        cmd += ["-genv", k, v]
    cmd += argv
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def parse_bins(argv):
    keys = ["collector", "agent", "export", "client", "mpiexec", "app", "preload_prefix"]
    bins = {}
    for arg in argv:
        k, _, v = arg.partition("=")
        bins[k.lstrip("-").replace("-", "_")] = v
    missing = [k for k in keys if k not in bins]
    if missing:
        raise SystemExit("missing arguments: " + ", ".join(missing))
    return bins
