"""Starts a real iotrace collector and agent on loopback for a test, and
runs programs with libiotrace-client preloaded under mpiexec."""
import collections
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import free_port  # noqa: E402,F401  (the integration tests take it from here)


class Deployment:
    # The agent names the node as the ranks do (the short host name), so that
    # the agent's clock samples apply to their events.
    def __init__(self, bins, node=socket.gethostname().split(".")[0]):
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

    def start_collector(self, *extra):
        """Extra collector options; without them the HTTP server is off, so
        that tests never contend for its port."""
        self.collector = subprocess.Popen(
            [self.bins["collector"], "--listen", f"tcp://127.0.0.1:{self.port}", "--store", self.store]
            + (list(extra) or ["--http", "off"]),
            stderr=self.log("collector"))

    def start_agent(self):
        self.agent = subprocess.Popen(
            [self.bins["agent"], "--collector", f"tcp://127.0.0.1:{self.port}",
             "--listen", self.endpoint, "--node", self.node,
             "--state-dir", os.path.join(self.tmp, "agent-state")],
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
        # A failing test keeps its directory (logs, store) for a post-mortem.
        if sys.exc_info()[0] is None and not os.environ.get("IOTRACE_KEEP_TEST_DIR"):
            shutil.rmtree(self.tmp, ignore_errors=True)
        else:
            print(f"test files kept in {self.tmp}", file=sys.stderr)

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

    def frozen_at_exit(self, proc, after_s, timeout=120):
        """Freezes the agent (SIGSTOP: alive, reading nothing) after_s seconds
        into proc, until proc has ended; proc's (returncode, stderr)."""
        time.sleep(after_s)
        self.agent.send_signal(signal.SIGSTOP)
        try:
            _, err = proc.communicate(timeout=timeout)
        finally:
            self.agent.send_signal(signal.SIGCONT)
        return proc.returncode, err

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


EXIT_REPORT_RE = re.compile(
    r"iotrace-client\[(\d+)\]: made (\d+) events: (\d+) sent in (\d+) batches, (\d+) counted in "
    r"drop records sent, (\d+) lost with no batch left to count them; (\d+) batches not taken by "
    r"the agent, (\d+) left in its drop box; (\d+) batches sent by MPI-IO calls")
EXIT_REPORT_FIELDS = ("made", "sent", "batches", "counted", "lost", "not_taken", "boxed", "by_calls")


def exit_reports(stderr):
    """The library's exit reports (IOTRACE_VERBOSE=1) in a program's stderr:
    {pid: {made, sent, batches, counted, lost, not_taken, boxed, by_calls}},
    the fields in the order docs/client.md's IOTRACE_VERBOSE gives them."""
    return {int(m.group(1)): dict(zip(EXIT_REPORT_FIELDS, map(int, m.groups()[1:])))
            for m in EXIT_REPORT_RE.finditer(stderr)}


def accounted(events):
    """Per pid, the events stored plus those its drop records count: what
    the process made, when nothing was lost uncounted."""
    n = collections.Counter()
    for e in events:
        n[e["pid"]] += e["dropped"] if e["kind"] == "drop" else 1
    return n


def headless_chromium(tmp, *extra):
    """Debian's chromium under Debian's chromedriver, headless, with a
    profile of its own in tmp: what the browser tests share."""
    # python3-selenium is Debian's: visible to /usr/bin/python3, and to
    # another interpreter once its dist-packages are on the path.
    if "/usr/lib/python3/dist-packages" not in sys.path:
        sys.path.append("/usr/lib/python3/dist-packages")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        raise AssertionError("python3-selenium is not installed (deploy/install-deps.sh installs it)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              f"--user-data-dir={tempfile.mkdtemp(dir=tmp)}", *extra):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)


LSAN_SUPPRESSIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lsan.supp")


def sanitizer_env(bins):
    """Sanitizer settings for the test programs.  The sanitizer build (the one
    that preloads the ASan runtime) instruments them whether or not the
    library is preloaded, so a baseline run needs these as much as a traced
    one.  Leaks are checked; lsan.supp says why its entries are there, and
    its hwloc entry can only match with the slow unwinder."""
    if not bins["preload_prefix"]:
        return {}
    return {"ASAN_OPTIONS": "fast_unwind_on_malloc=0",
            "LSAN_OPTIONS": "suppressions=" + LSAN_SUPPRESSIONS}


def end_brick(brick, registry):
    """After a test's tests/server/registry_brick: the brick ended, and the
    CallID registry the ranks made under the name the test gave them gone."""
    if brick.poll() is None:
        brick.kill()
    shm = "/dev/shm" + registry + f"-{os.geteuid()}"
    if os.path.exists(shm):
        os.unlink(shm)


def mpirun_cmd(bins, nprocs, argv, env=None, preload=True):
    cmd = [bins["mpiexec"], "-n", str(nprocs)]
    if preload:
        cmd += ["-genv", "LD_PRELOAD", bins["preload_prefix"] + bins["client"]]
    for k, v in {**sanitizer_env(bins), **(env or {})}.items():
        cmd += ["-genv", k, v]
    return cmd + argv


def mpirun(bins, nprocs, argv, env=None, preload=True, timeout=120):
    return subprocess.run(mpirun_cmd(bins, nprocs, argv, env, preload), capture_output=True,
                          text=True, timeout=timeout)


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
