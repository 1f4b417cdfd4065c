"""What the Python test scripts and benchmarks share: failures collected
and printed as they happen, a free loopback port, waiting for a condition,
the end of a test's processes and directory, CPU time per thread, a store's
events counted per job and drop reason."""
import collections
import json
import os
import shutil
import socket
import subprocess
import sys
import time

failures = []


def check(ok, what):
    """Records a failed check (and says so on stderr); returns ok."""
    if not ok:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return ok


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_all(procs):
    """Kills the processes that are still running."""
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def finish(tmp):
    """Removes a test's directory, or keeps it (and says where) when a check
    failed or IOTRACE_KEEP_TEST_DIR is set; returns the test's exit status."""
    if failures or os.environ.get("IOTRACE_KEEP_TEST_DIR"):
        print(f"{len(failures)} checks failed; files kept in {tmp}", file=sys.stderr)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


def until(what, timeout):
    """Calls what() every 0.1 s until it returns something true or timeout
    seconds have passed; returns its last value."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = what()
        if v:
            return v
        time.sleep(0.1)
    return what()


def store_counts(export, store, done, timeout):
    """Events per (job, drop reason or False) in a store, read with
    iotrace-export --jsonl until done(counts) or timeout seconds have
    passed; returns the last counts."""
    got = collections.Counter()
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = subprocess.run([export, "--store", store, "--jsonl", "-"], capture_output=True, text=True)
        got = collections.Counter()
        for e in map(json.loads, r.stdout.splitlines()):
            got[(e["job"], e["kind"] == "drop" and e["reason"])] += e["dropped"] if e["kind"] == "drop" else 1
        if done(got):
            break
        time.sleep(0.3)
    return got


def job_total(got, job):
    """Events of job `job` in store_counts(), stored or counted."""
    return sum(n for (j, _), n in got.items() if j == job)


def thread_stats(pid):
    """(thread name, fields of /proc/PID/task/TID/stat after the name) for
    each thread of a process; threads that ended meanwhile are left out."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        yield stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()


def thread_cpu(pid):
    """{thread name: CPU seconds} of a process, from /proc (threads of one
    name summed)."""
    clk = os.sysconf("SC_CLK_TCK")
    out = {}
    for name, fields in thread_stats(pid):
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / clk
    return out


class BusyCores:
    """Keeps n cores (all of them by default) busy while a test runs: busy
    loops at normal priority, started and ended by the test itself.  A test
    that holds only on a quiet machine is a broken test; under this it must
    wait for what it needs, not for longer."""

    def __init__(self, n=None):
        self.n = n or len(os.sched_getaffinity(0))
        self.procs = []

    def __enter__(self):
        import subprocess
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                      for _ in range(self.n)]
        return self

    def __exit__(self, *exc):
        stop_all(self.procs)
        self.procs = []
        return False
