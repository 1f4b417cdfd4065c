#!/usr/bin/env python3
"""A thread that records faster than its sender gets a core loses nothing
while IOTRACE_OVERFLOW_MB lasts: bursts of pwrite and lseek (posix_burst)
into small buffers, with the sender thread at SCHED_IDLE and both cores
kept busy by the test's own load (so that the sender gets almost no
time), keep every event; with IOTRACE_OVERFLOW_MB=0 the same run drops and
counts exactly what it drops (stored + counted = made)."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from harness import Deployment, accounted, exit_reports, parse_bins, sanitizer_env  # noqa: E402

BURSTS, CALLS = 2, 200000


def busy_cores(n):
    """n processes spinning at normal priority for the test's duration."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def run(bins, dep, job, extra):
    shm = tempfile.mkdtemp(prefix="iotrace-overflow-",
                           dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    env = dict(os.environ, **sanitizer_env(bins), LD_PRELOAD=bins["preload_prefix"] + bins["client"],
               IOTRACE_AGENT=dep.endpoint, IOTRACE_JOB_ID=job, IOTRACE_VERBOSE="1",
               IOTRACE_SENDER_SCHED="idle", IOTRACE_BUFFER_EVENTS="4096", **extra)
    load = busy_cores(os.cpu_count() or 2)
    try:
        res = subprocess.run([bins["burst_app"], os.path.join(shm, "burst.bin"), str(BURSTS),
                              str(CALLS), "10"], env=env, capture_output=True, text=True,
                             timeout=300)
    finally:
        for p in load:
            p.kill()
            p.wait()
        subprocess.run(["rm", "-rf", shm])
    if res.returncode != 0:
        raise AssertionError(f"{job}: exit {res.returncode}\n{res.stderr}")
    (report,) = exit_reports(res.stderr).values()
    made = report["made"]
    ev = dep.wait_for(lambda ev: sum(accounted(ev).values()) >= made, job=job, timeout=120)
    stored = sum(1 for e in ev if e["kind"] != "drop")
    dropped = sum(e["dropped"] for e in ev if e["kind"] == "drop")
    print(f"{job}: made {made}, stored {stored}, counted as dropped {dropped}; "
          + res.stdout.strip().replace("\n", "; "))
    assert stored + dropped == made, f"{job}: {stored} stored + {dropped} dropped != {made} made"
    return made, stored, dropped


def main():
    bins = parse_bins(sys.argv[1:])
    dep = Deployment(bins).start()
    try:
        made, stored, dropped = run(bins, dep, "overflow", {})
        assert dropped == 0 and stored == made, \
            f"with the default IOTRACE_OVERFLOW_MB, {dropped} of {made} events dropped"
        made, stored, dropped = run(bins, dep, "no-overflow", {"IOTRACE_OVERFLOW_MB": "0"})
        # The sender at SCHED_IDLE beside two busy loops cannot keep up with
        # 4 096-record buffers: without the overflow it must drop, or the
        # first run proved nothing.
        assert dropped > 0, "the starved sender kept up without the overflow: the test is void"
        print("ok: nothing lost with the overflow, losses counted exactly without it")
    finally:
        dep.stop()


if __name__ == "__main__":
    main()
