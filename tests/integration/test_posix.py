#!/usr/bin/env python3
"""Every POSIX and stdio wrapper, offsets tracked without system calls, and
fork: the child is a producer of its own and the parent keeps tracing;
batches split under the agent's size limit; bursts after quiet spells
wake the sender before a ring overflows."""
import collections
import os
import re
import subprocess
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from harness import Deployment, parse_bins, sanitizer_env  # noqa: E402

# (func, offset, bytes) of one io_round, in order, on the .dat file
ROUND = [("open", -1, 0), ("write", 0, 10), ("write", 10, 6), ("pwrite", 100, 8),
         ("pread", 100, 8), ("lseek", 200, 0), ("writev", 200, 32), ("pwritev", 300, 32),
         ("preadv", 300, 32), ("pwritev2", 400, 32), ("preadv2", 400, 32), ("lseek", 0, 0),
         ("read", 0, 16), ("readv", 16, 32), ("fsync", -1, 0), ("fdatasync", -1, 0),
         ("ftruncate", 1000, 0), ("close", -1, 0), ("fopen", -1, 0), ("fwrite", -1, 20),
         ("fread", -1, 20), ("fclose", -1, 0)]


def many_names(bins, dep):
    """A batch larger than an agent takes (IOT_WIRE_MAX_PRODUCER_BATCH, 256 KiB)
    goes out as several: 3000 files with 194-character random names opened
    within one flush interval make about 700 KB of names in one batch of
    32768 records; unsplit, the agent refuses it and the events are lost."""
    d = os.path.join(dep.tmp, "names")
    os.mkdir(d)
    # Random, so that LZ4 cannot make them small.
    paths = [os.path.join(d, os.urandom(97).hex()) for i in range(3000)]
    env = dict(os.environ, LD_PRELOAD=bins["preload_prefix"] + bins["client"], IOTRACE_AGENT=dep.endpoint,
               IOTRACE_JOB_ID="many-names", IOTRACE_FLUSH_MS="3000", IOTRACE_BATCH_EVENTS="32768",
               IOTRACE_VERBOSE="1", **sanitizer_env(bins))
    # Python's own allocations are not the library's business.
    env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
    make = "import sys\nfor p in sys.argv[1:]:\n    open(p, 'w').close()\n"
    res = subprocess.run([sys.executable, "-c", make] + paths, env=env, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res
    report = [line for line in res.stderr.splitlines() if "events:" in line]
    m = re.search(r"made (\d+) events: (\d+) sent in (\d+) batches", report[-1] if report else "")
    assert m and m[1] == m[2] and int(m[3]) >= 3, f"not split, or not all sent: {res.stderr[-2000:]}"

    def complete(ev):
        return len({e["file"] for e in ev if e["kind"] == "posix"} & set(paths)) == len(paths)

    events = dep.wait_for(complete, job="many-names")
    posix = [e for e in events if e["kind"] == "posix"]
    assert len(posix) == int(m[1]), f"{len(posix)} events stored of {m[1]} made"
    assert not any(e["kind"] == "drop" for e in events), [e for e in events if e["kind"] == "drop"]
    agent_log = open(os.path.join(dep.tmp, "agent.log"), errors="replace").read()
    assert "rejected a message" not in agent_log, agent_log[-2000:]
    print(f"ok: {m[1]} events and {len(paths)} file names of ~210 bytes sent in {m[3]} batches, "
          f"each under 256 KiB, all stored with their names")


def burst_after_quiet(bins):
    """After a quiet spell the sender sleeps as long as its smallest buffer
    allows (8 ms for buffers of 16 384 records, a storage server's default);
    a burst of pwrite and lseek to a file in /dev/shm as fast as they go
    (about 3 M a second in the plain build) fills such a buffer in about
    5 ms, so a burst that begins soon after the sender fell asleep overflows
    the buffer unless the thread wakes the sender, and lets it run, when
    its buffer is a quarter full.  Twelve bursts of 150 000 calls after
    100 ms of quiet each: nothing may be dropped.  (Without the wake-up,
    three runs in four of the plain build dropped 12 000 to 58 000 events.)
    In the sanitizer build the sender, unoptimised and instrumented, cannot
    keep up with such a loop at all: there what is dropped must be counted
    exactly, made = sent + dropped, and every event stored or in a drop
    record.  The collector only stores here, as one on another node would:
    its live analysis of 3 M events a second would take most of a core of
    this machine from the sender.  Whether the sender gets a core in time
    also depends on what else the (shared, 2-core) machine runs: a run that
    dropped, always with exact accounting, is followed by a second one,
    which must drop nothing (a first run in a run of the whole suite once
    dropped 1 390 of 1.8 M events, counted)."""
    dep = Deployment(bins)
    dep.start_collector("--analysis", "off", "--http", "off")
    dep.start_agent()
    sanitized = bool(bins["preload_prefix"])
    try:
        dropped = burst_run(bins, dep)
        if dropped and not sanitized:
            print(f"note: {dropped} events dropped and counted in the first run; running again")
            dropped = burst_run(bins, dep)
        assert sanitized or dropped == 0, f"events dropped in both runs of the bursts: {dropped}"
    finally:
        dep.stop()


def burst_run(bins, dep):
    shm = tempfile.mkdtemp(prefix="iotrace-burst-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    path = os.path.join(shm, "burst.dat")
    env = dict(os.environ, LD_PRELOAD=bins["preload_prefix"] + bins["client"], IOTRACE_AGENT=dep.endpoint,
               IOTRACE_JOB_ID="burst", IOTRACE_BUFFER_EVENTS="16384", IOTRACE_VERBOSE="1",
               **sanitizer_env(bins))
    try:
        res = subprocess.run([bins["burst_app"], path, "12", "150000", "100"], env=env,
                             capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(shm, ignore_errors=True)
    assert res.returncode == 0, res
    report = [line for line in res.stderr.splitlines() if "events:" in line]
    m = re.search(r"made (\d+) events: (\d+) sent in (\d+) batches, (\d+) counted in drop records",
                  report[-1] if report else "")
    assert m, res.stderr[-2000:]
    made, sent, dropped = int(m[1]), int(m[2]), int(m[4])
    sanitized = bool(bins["preload_prefix"])
    assert made == sent + dropped and made >= 12 * 150000, report[-1]

    pid = int(re.search(r"iotrace-client\[(\d+)\]", report[-1])[1])

    def tally(ev):
        return (sum(1 for e in ev if e["kind"] != "drop" and e["pid"] == pid),
                sum(e["dropped"] for e in ev if e["kind"] == "drop" and e["pid"] == pid))

    events = dep.wait_for(lambda ev: sum(tally(ev)) >= made, job="burst", timeout=60)
    stored, counted = tally(events)
    assert (stored, counted) == (sent, dropped), (stored, counted, report[-1])
    rates = [150000 / float(x) / 1e3 for x in re.findall(r"in ([\d.]+) ms", res.stdout)]
    print(f"ok: 12 bursts of 150 000 pwrite and lseek after quiet spells, {min(rates):.1f}-{max(rates):.1f} M calls/s, "
          f"buffers of 16 384 records: {made} events made, {sent} sent and stored, {dropped} dropped and "
          f"counted{' (sanitizer build)' if sanitized else ''}")
    return dropped


def main():
    bins = parse_bins(sys.argv[1:])
    dep = Deployment(bins).start()
    try:
        env = dict(os.environ, LD_PRELOAD=bins["preload_prefix"] + bins["client"],
                   IOTRACE_AGENT=dep.endpoint, IOTRACE_JOB_ID="posix-test", **sanitizer_env(bins))
        res = subprocess.run([bins["posix_app"], dep.tmp], env=env, capture_output=True, text=True,
                             timeout=60)
        assert res.returncode == 0 and "child exit 0" in res.stdout, res
        parent = os.path.join(dep.tmp, "parent.dat")
        child = os.path.join(dep.tmp, "child.dat")

        def complete(ev):
            n = collections.Counter(e["file"] for e in ev if e["kind"] == "posix")
            return n[parent] >= 2 * len(ROUND) and n[child] >= len(ROUND)

        events = dep.wait_for(complete, job="posix-test")
        posix = [e for e in events if e["kind"] == "posix"]
        pids = {f: {e["pid"] for e in posix if e["file"] == f} for f in (parent, child)}
        assert len(pids[parent]) == 1 and len(pids[child]) == 1 and pids[parent] != pids[child], pids
        for path, rounds in ((parent, 2), (child, 1)):
            got = [(e["func"], e["offset"], e["bytes"]) for e in posix if e["file"] == path]
            if got != ROUND * rounds:
                raise AssertionError(f"{path}:\n got {got}\nwant {ROUND * rounds}")
            for e in posix:
                if e["file"] == path and e["callid"] is not None:
                    raise AssertionError(f"{e} outside MPI-IO carries a CallID")
        creat = [e["func"] for e in posix if e["file"] and e["file"].endswith(".creat")]
        assert creat.count("creat") == 3 and creat.count("openat") == 3, creat
        print(f"ok: {len(posix)} POSIX events, parent and forked child traced")
        many_names(bins, dep)
    finally:
        dep.stop()
    burst_after_quiet(bins)


if __name__ == "__main__":
    main()
