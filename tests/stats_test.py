#!/usr/bin/env python3
"""End-to-end test of iotrace-export --stats.

Runs the real collector, has collector_client send a known workload
(its "stats" phase: two jobs, three ranks on two client nodes whose clocks
are 3 s behind and 1.5 s ahead of the collector's, two storage servers, a
collective write with two aggregators, a disk operation starting before its
call, a non-blocking write, unmatched calls and operations, lost events),
then checks `--stats --format json` against figures worked out by hand
below, the text report, --job, --no-align and the option errors; and the
collector's live statistics of the same store against the export's.

    stats_test.py COLLECTOR EXPORT CLIENT
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from testlib import check, failures, free_port  # noqa: E402

COLLECTOR, EXPORT, CLIENT = sys.argv[1:4]
VERSION = subprocess.run([EXPORT, "--version"], capture_output=True, text=True).stdout.split()[-1]
US = 1000


def run(args):
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def hist():
    return {"0": 0, "1": 0, "2": 0, "3-4": 0, "5-8": 0, "9-16": 0, ">16": 0}


def fn(count, nbytes, durations_us, ops, disk_bytes):
    """A function's figures from its calls' durations and its disk
    operations per call (None: no call of its own to count, a completion)."""
    total = sum(durations_us) * US
    h = hist()
    for n in ops:
        h[{0: "0", 1: "1", 2: "2", 3: "3-4", 4: "3-4"}[n]] += 1
    return {"count": count, "bytes": nbytes, "time_ns": total,
            "mean_ns": (total + count // 2) // count,
            "p50_ns": sorted(durations_us)[(count + 1) // 2 - 1] * US,
            "p99_ns": max(durations_us) * US,
            "disk_ops_per_call": {"mean": sum(ops) / len(ops) if ops else None,
                                  "max": max(ops) if ops else 0, "histogram": h},
            "disk_bytes": disk_bytes}


# jobS, by hand (times in us; see collector_client.c, "the statistics workload").
# MPI_File_write_at: rank 0's [1000, 3000] with a writev on each server
# (1000 B each), rank 2's [30000, 31000] with none (unmatched).
# MPI_File_read_at: rank 1's [2000, 2500]; its readv on s1 (500 B) starts at
# 1990, before the call: held, then matched.
# MPI_File_write_at_all: ranks 0, 1, 2 with coll_seq 3, durations 10000, 9900
# and 9700; the aggregators issue 8192 B (s1) + 4096 B (s2) as rank 0 and
# 4096 B (s2) as rank 2: 3 operations for every member, 16384 B.
# MPI_File_sync: rank 0's, with one fsync on s1.  MPI_File_iwrite_at: rank
# 1's 2048 B, written on s2 at 51000 while MPI_Wait [52000, 53000] is
# pending: counted for the iwrite; the Wait has no call of its own.
FUNCS_S = {
    "MPI_File_write_at": fn(2, 1100, [2000, 1000], [2, 0], 2000),
    "MPI_File_read_at": fn(1, 500, [500], [1], 500),
    "MPI_File_write_at_all": fn(3, 3 * 4096, [10000, 9900, 9700], [3, 3, 3], 16384),
    "MPI_File_sync": fn(1, 0, [1000], [1], 0),
    "MPI_File_iwrite_at": fn(1, 2048, [100], [1], 2048),
    "MPI_Wait": fn(1, 2048, [1000], [], 0),
}
# s1: writev 1000 [1500,1800], readv 500 [1990,2300], writev 8192
# [15000,16000], fsync [32500,32900], fsync of no call [40000,40100],
# readv 512 without CallID [41000,41200]; its writev for jobT and a readv
# without a job are not jobS's.  s2: [1600,2000], [15500,17000] and
# [16000,16500] overlapping, [51000,51500].
SERVERS_S = {
    "s1:/bricks/b1": {"ops": 6, "bytes": 1000 + 500 + 8192 + 512,
                      "busy_ns": (300 + 310 + 1000 + 400 + 100 + 200) * US},
    "s2:/bricks/b2": {"ops": 4, "bytes": 1000 + 4096 + 4096 + 2048,
                      "busy_ns": (400 + 1500 + 500) * US},
}
CALL_BYTES_S = 1100 + 500 + 3 * 4096 + 0 + 2048           # MPI_Wait repeats its bytes
CALL_TIME_S = (3000 + 500 + 29600 + 1000 + 100 + 1000) * US  # every MPI-IO event
DISK_TIME_S = (300 + 400 + 310 + 1000 + 1500 + 500 + 400 + 500) * US  # attributed only
CLOCK_C1 = {"offset_ns": 3000000000, "rtt_ns": 2000, "error_ns": 1500}
CLOCK_C2 = {"offset_ns": -1500000000, "rtt_ns": 800, "error_ns": 400}
CLOCK_S1 = {"offset_ns": 250000, "rtt_ns": 500, "error_ns": 500}
CLOCK_NONE = {"offset_ns": None, "rtt_ns": None, "error_ns": None}

JOB_S = {
    "job": "jobS", "functions": FUNCS_S, "servers": SERVERS_S,
    "amplification": sum(s["bytes"] for s in SERVERS_S.values()) / CALL_BYTES_S,
    "disk_time_share": DISK_TIME_S / CALL_TIME_S,
    "unmatched_calls": 1, "unmatched_disk_ops": 1, "dropped_events": 5,
    "disk_only_calls": 1, "disk_only_calls_by_rank": {"0": 1},
    "clock": {"c1": CLOCK_C1, "c2": CLOCK_C2, "s1": CLOCK_S1, "s2": CLOCK_NONE},
}
JOB_T = {
    "job": "jobT", "functions": {"MPI_File_write_at": fn(1, 300, [1000], [1], 300)},
    "servers": {"s1:/bricks/b1": {"ops": 1, "bytes": 300, "busy_ns": 200 * US}},
    "amplification": 1.0, "disk_time_share": 0.2,
    "unmatched_calls": 0, "unmatched_disk_ops": 0, "dropped_events": 0,
    "disk_only_calls": 0, "disk_only_calls_by_rank": {},
    "clock": {"c2": CLOCK_C2, "s1": CLOCK_S1},
}

# Quantiles come from a histogram: within 2^-8 of the exact value.
QUANTILE_ERROR = 1 / 256


def close(a, b, rel):
    return a == b or (isinstance(a, (int, float)) and isinstance(b, (int, float))
                      and abs(a - b) <= rel * abs(b))


def compare(got, want, path):
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            check(False, f"{path}: keys {sorted(got) if isinstance(got, dict) else got} "
                         f"!= {sorted(want)}")
            return
        for k in want:
            compare(got[k], want[k], f"{path}.{k}")
        return
    if isinstance(want, list):
        check(isinstance(got, list) and len(got) == len(want), f"{path}: {got} != {want}")
        for i, (g, w) in enumerate(zip(got or [], want)):
            compare(g, w, f"{path}[{i}]")
        return
    rel = QUANTILE_ERROR if path.endswith("p50_ns") else 1e-9  # p99 of < 100 calls: the max
    check(close(got, want, rel), f"{path}: {got!r}, expected {want!r}")


def start_collector(tmp, store):
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    log = open(os.path.join(tmp, "collector.log"), "w")
    proc = subprocess.Popen([COLLECTOR, "--listen", endpoint, "--store", store, "--http", "off"],
                            stdout=log, stderr=log)
    deadline = time.time() + 20
    while time.time() < deadline and proc.poll() is None:
        with open(os.path.join(tmp, "collector.log")) as f:
            if "listening on" in f.read():
                return proc, log, endpoint
        time.sleep(0.05)
    check(False, "collector did not start")
    return proc, log, endpoint


def make_store(tmp, workload="stats"):
    store = os.path.join(tmp, workload + "-store")
    proc, log, endpoint = start_collector(tmp, store)
    # Half a minute ago, to the microsecond: the events are history by the
    # time the store is read, as in a real trace.
    base = (time.time_ns() - 30 * 10**9) // US * US
    r = run([CLIENT, endpoint, workload, "64", str(base)])
    check(r.returncode == 0, f"collector_client {workload} failed: {r.stderr.strip()}")
    proc.send_signal(signal.SIGTERM)
    check(proc.wait(timeout=30) == 0, "collector did not stop cleanly")
    log.close()
    return store


def stats(store, *args):
    return run([EXPORT, "--store", store, "--stats", "--lateness", "60000", *args])


def check_json(store):
    r = stats(store, "--format", "json")
    check(r.returncode == 0, f"--stats --format json failed: {r.stderr}")
    if r.returncode != 0:
        return
    got = json.loads(r.stdout)
    spans = {}
    for j in got.get("jobs", []):
        spans[j.get("job")] = j.pop("time_span", None)
    check_spans(store, spans)
    want = {"schema": "iotrace-stats/2", "tool": {"name": "iotrace", "version": VERSION},
            "parameters": {"lateness_ms": 60000, "grace_ms": 2000, "aligned": True},
            "jobs": [dict(JOB_S, name=None, uid=None), dict(JOB_T, name=None, uid=None)]}
    compare(got, want, "stats")
    check("late" not in r.stderr, f"unexpected late events: {r.stderr}")
    check("node 's2' has no clock samples" in r.stderr, f"no warning about s2: {r.stderr}")
    # A pass for one job leaves the other job's batches undecoded (its
    # processes' and, where no event names the job, the servers'): the
    # figures, and what is said of the nodes' clocks, are those of the
    # whole store's pass.
    warnings = [line for line in r.stderr.splitlines() if "clock samples" in line]
    for k, name in enumerate(("jobS", "jobT")):
        one = stats(store, "--format", "json", "--job", name)
        only = None
        if one.returncode == 0:
            only = json.loads(one.stdout)
            del only["jobs"][0]["time_span"]
        check(one.returncode == 0 and only == dict(got, jobs=[got["jobs"][k]]),
              f"--job {name}: {one.stdout} {one.stderr}")
        mine = [line for line in one.stderr.splitlines() if "clock samples" in line]
        check(mine == warnings, f"--job {name} says {mine}, the whole store {warnings}")


def check_skipped_files(tmp):
    """A pass for one job (--chrome and --slog2 --job, a job's final figures)
    leaves undecoded the batches that only other jobs' events are in; a
    storage server's file names in them are still read.  The "files" store:
    the server names its file in a batch of jobA's operations and works on it
    for jobB in the next.  Each job's slices carry what --jsonl (which reads
    every batch) says of its events, the file's name included."""
    store = make_store(tmp, "files")
    for job in ("jobA", "jobB"):
        out = os.path.join(tmp, job + ".json")
        r = run([EXPORT, "--store", store, "--job", job, "--chrome", out, "--lateness", "60000"])
        rows = run([EXPORT, "--store", store, "--job", job, "--jsonl", "-"])
        check(r.returncode == 0 and rows.returncode == 0, f"--job {job}: {r.stderr} {rows.stderr}")
        if r.returncode or rows.returncode:
            continue
        with open(out) as f:
            slices = [e["args"] for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
        want = [json.loads(line) for line in rows.stdout.splitlines()]
        key = lambda e: (e["t_start"], e["kind"])  # noqa: E731
        check(sorted(slices, key=key) == sorted(want, key=key),
              f"--job {job}: slices {slices}, rows {want}")
        files = [e["file"] for e in slices if e["kind"] == "disk"]
        check(files == ["/bricks/b9/shared.dat"], f"--job {job}: disk operations on {files}")


def check_spans(store, spans):
    """A job's time span is the first start and last end of its MPI-IO calls
    and disk operations, as the JSON Lines rows show them."""
    r = run([EXPORT, "--store", store, "--jsonl", "-"])
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    for job in ("jobS", "jobT"):
        mine = [e for e in rows if e["job"] == job and e["kind"] in ("mpiio", "disk")]
        span = spans.get(job) or {}
        first, last = min(e["t_start"] for e in mine), max(e["t_end"] for e in mine)
        iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(first // 10**9)) + f".{first % 10**9:09d}Z"
        check(span.get("first_ns") == first and span.get("last_ns") == last
              and span.get("duration_ns") == last - first and span.get("first") == iso,
              f"{job}: time span {span}, the rows say {first}..{last} ({iso})")


def check_text(store):
    r = stats(store)
    check(r.returncode == 0, f"--stats failed: {r.stderr}")
    lines = [" ".join(line.split()) for line in r.stdout.splitlines()]
    want = [
        "job jobS", "job jobT",
        "MPI_File_write_at_all 3 12288 29600000 9866667",
        "MPI_Wait 1 2048 1000000 1000000 1000000 1000000 - 0 0 0/0/0/0/0/0/0",
        "s1:/bricks/b1 6 10204 2310000", "s2:/bricks/b2 4 11240 2400000",
        "amplification 1.346", "disk_time_share 0.139", "unmatched_calls 1",
        "unmatched_disk_ops 1", "dropped_events 5", "disk_only_calls 1 (rank 0: 1)",
        "c1 3000000000 2000 1500", "c2 -1500000000 800 400", "s2 - - -",
    ]
    for w in want:
        check(any(line.startswith(w) for line in lines), f"text report lacks '{w}':\n{r.stdout}")


def check_unaligned(store):
    """Left on their own clocks, rank 0's and 1's calls are 3 s early and rank
    2's 1.5 s late: with a grace of 1 s none of them meets its disk
    operations.  Unmatched: all 9 of jobS's operations with a CallID, and the
    7 reads and writes (MPI_File_sync expects none)."""
    r = stats(store, "--format", "json", "--no-align", "--grace", "1000")
    check(r.returncode == 0, f"--no-align failed: {r.stderr}")
    if r.returncode == 0:
        job = json.loads(r.stdout)["jobs"][0]
        check(job["unmatched_disk_ops"] == 9 and job["unmatched_calls"] == 7,
              f"--no-align: unmatched {job['unmatched_disk_ops']} operations, "
              f"{job['unmatched_calls']} calls")
        # Rank 2's calls come 1.5 s after their operations and take their
        # CallIDs back; ranks 0's and 1's came 3 s before theirs: those
        # count as seen only by the disks.
        check(job["disk_only_calls"] == 6 and job["disk_only_calls_by_rank"] == {"0": 4, "1": 2},
              f"--no-align: disk_only_calls {job['disk_only_calls']} {job['disk_only_calls_by_rank']}")


def check_errors(store):
    for args, rc, text in [
        (["--stats", "--format", "xml"], 2, "--format takes text or json"),
        (["--jsonl", "-", "--format", "json"], 2, "with --stats only"),
        (["--stats", "--grace", "-5"], 2, "milliseconds"),
        (["--stats", "--clock"], 2, "exactly one of"),
        (["--stats", "--job", "nojob"], 1, "job 'nojob' has no events"),
    ]:
        r = run([EXPORT, "--store", store, *args])
        check(r.returncode == rc and text in r.stderr,
              f"{args}: rc {r.returncode}, stderr {r.stderr!r}")
    r = run([EXPORT, "--help"])
    check("--stats" in r.stdout and "--format" in r.stdout, "--help does not show --stats")


def api(port, path):
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def check_live(tmp, store):
    """The collector's live analysis over the same store: every job's
    /api/v1/jobs/JOB/stats is byte for byte --stats --format json --job JOB,
    whether its figures were kept in memory when it finished (--keep 3600)
    or are recomputed from the store when asked for (--keep 0)."""
    for keep in ("3600", "0"):
        port = free_port()
        log = open(os.path.join(tmp, f"live-{keep}.log"), "w")
        proc = subprocess.Popen([COLLECTOR, "--listen", f"tcp://127.0.0.1:{free_port()}",
                                 "--store", store, "--http", f"127.0.0.1:{port}",
                                 "--lateness", "60000", "--job-idle", "200", "--keep", keep],
                                stdout=log, stderr=log)
        try:
            deadline = time.time() + 30
            jobs = []
            while time.time() < deadline:
                try:
                    jobs = json.loads(api(port, "/api/v1/jobs")[1])["jobs"]
                except (OSError, ValueError):
                    jobs = []
                if jobs and all(j["state"] == "finished" for j in jobs):
                    break
                time.sleep(0.1)
            check(sorted(j["job"] for j in jobs) == ["jobS", "jobT"], f"live jobs: {jobs}")
            for j in jobs:
                check(j["final_stats_in_memory"] == (keep != "0"),
                      f"--keep {keep}: final_stats_in_memory of {j['job']} is {j['final_stats_in_memory']}")
                status, body = api(port, f"/api/v1/jobs/{j['job']}/stats")
                want = stats(store, "--format", "json", "--job", j["job"]).stdout.encode()
                check(status == 200 and body == want,
                      f"--keep {keep}: /stats of {j['job']} differs from --stats --format json")
            metrics = api(port, "/metrics")[1].decode()
            check(('job_id="jobS"' in metrics) == (keep != "0"),
                  f"--keep {keep}: job series {'missing from' if keep != '0' else 'left in'} /metrics")
        finally:
            proc.send_signal(signal.SIGTERM)
            check(proc.wait(timeout=30) == 0, "live collector did not stop cleanly")
            log.close()


def main():
    tmp = tempfile.mkdtemp(prefix="iot-stats-test-")
    try:
        store = make_store(tmp)
        r = run([EXPORT, "--store", store, "--verify"])
        check(r.returncode == 0 and "verdict ok" in r.stdout and "end complete" in r.stdout
              and "unreadable_batches 0" in r.stdout, f"--verify of a sound store: {r.stdout!r}")
        check_json(store)
        check_text(store)
        check_unaligned(store)
        check_errors(store)
        check_live(tmp, store)
        check_skipped_files(tmp)
    finally:
        if failures:
            print(f"{len(failures)} checks failed; files kept in {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
