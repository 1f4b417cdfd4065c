#!/usr/bin/env python3
"""End-to-end test of iotrace-collector and iotrace-export.

Runs the real collector on 127.0.0.1 with a temporary store, drives it with
collector_client (valid, duplicate, damaged and garbage messages), restarts it
on the same store, then checks the exported events field by field, the job
list, damaged stores and bad arguments.

    collector_test.py COLLECTOR EXPORT CLIENT
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
T0 = 1700000000000000000


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=60, **kw)


class Collector:
    def __init__(self, args, log_path):
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen([COLLECTOR] + args, stderr=self.log, stdout=self.log)

    def wait_listening(self):
        deadline = time.time() + 20
        while time.time() < deadline:
            if "listening on" in self.text():
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.05)
        return False

    def stop(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)
        rc = self.proc.wait(timeout=30)
        self.log.close()
        return rc

    def text(self):
        with open(self.log_path) as f:
            return f.read()


def ev(kind, job, node, rank, pid, tid, func, callid, file, offset, nbytes, ret, t, dur, **extra):
    """A --jsonl row: every column present, integers never null."""
    e = {"kind": kind, "role": "op" if kind == "disk" else "call", "job": job, "node": node,
         "mpi_rank": -1 if rank is None else rank, "pid": pid, "uid": -1, "tid": tid, "func": func,
         "callid": callid, "file": file, "mpi_info": None,
         "offset": -1 if offset is None else offset, "bytes": nbytes,
         "xfer": extra.pop("xfer", -1), "ret": ret, "t_start": T0 + t, "t_end": T0 + t + dur,
         "coll_seq": extra.pop("coll_seq", 0), "server": extra.pop("server", None), "reason": None,
         "dropped": 0}
    assert not extra, extra
    return e


def drop(node, pid, job, rank, reason, count, t_start, t_end, tid):
    return {"kind": "drop", "role": "drop", "job": job, "node": node, "mpi_rank": rank, "pid": pid,
            "uid": -1, "tid": tid, "func": None, "callid": None, "file": None, "mpi_info": None,
            "offset": -1, "bytes": 0, "xfer": -1, "ret": 0, "t_start": t_start, "t_end": t_end, "coll_seq": 0,
            "server": None, "reason": reason, "dropped": count}


# What the batches of collector_client hold, in export order.
EXPECTED = [
    ev("mpiio", "job42", "nodeB", 1, 2002, 2002, "MPI_File_read_at", "0x10000000001",
       "/data/other.dat", 8192, 100, 0, 1000, 1000, xfer=50),
    ev("mpiio", "job42", "nodeA", 0, 1001, 1001, "MPI_File_write_at", "0x1", "/data/out.dat",
       0, 4096, 0, 1000, 5000, xfer=4096),
    ev("disk", "job42", "store1", None, 3003, 77, "writev", "0x1", "/bricks/b1/data/out.dat",
       0, 4096, 4096, 1200, 800, server="brick1"),
    ev("posix", "job42", "nodeA", 0, 1001, 1001, "pwrite", "0x1", "/data/out.dat", 0, 4096,
       4096, 1500, 2000),
    ev("posix", "job42", "nodeA", 0, 1001, 1002, "writev", None, None, None, 100, 100, 2000, 100),
    ev("posix", "job42", "nodeA", 0, 1001, 1001, "read", None, "/data/out.dat", None, 10, -9,
       5000, 10),
    drop("nodeA", 1001, "job42", 0, "buffer_full", 7, T0 + 6000, T0 + 7000, 1001),
    ev("mpiio", "job42", "nodeA", 0, 1001, 1001, "MPI_File_write_at_all", "0x2", "/data/out.dat",
       4096, 4096, 0, 8000, 4000, xfer=4096, coll_seq=1),
    ev("disk", "job7", "store1", None, 3003, 78, "fsync", "0x5", "/bricks/b1/data/out.dat",
       None, 0, 0, 9000, 100, server="brick1"),
    ev("disk", None, "store1", None, 3003, 79, "readv", None, None, 0, 512, 512, 9000, 100,
       server="brick1"),
]

# collector_client's agent batches say nodeA's clock is 5 ns behind the
# collector's (ClockSync offset_ns = 5): exported times of nodeA are aligned
# by that much, nodeB and store1 have no samples and keep theirs.
CLOCK_A = 5
RAW = EXPECTED
EXPECTED = [dict(e, t_start=e["t_start"] + CLOCK_A, t_end=e["t_end"] + CLOCK_A)
            if e["node"] == "nodeA" else e for e in RAW]

# The batch with a sound envelope around a body that cannot be decoded: its
# events are lost and counted as dropped, at the time it was stored (checked
# apart: it is not known in advance).
UNREADABLE = drop("nodeB", 5005, "job9", 0, "unreadable", 3, None, None, 0)
EXPECTED.append(UNREADABLE)
RAW = RAW + [UNREADABLE]
STARTED_NS = time.time_ns()
UNREADABLE_WARNING = ("cannot be decoded: malformed batch body; its 3 events are counted as "
                      "dropped (unreadable)")


def same_event(got, want):
    """Equal, the stored time of the unreadable batch's drop aside."""
    if want is UNREADABLE:
        t = got.get("t_start")
        return (isinstance(t, int) and STARTED_NS <= t <= time.time_ns() and got.get("t_end") == t
                and dict(got, t_start=None, t_end=None) == want)
    return got == want


def same_events(got, want):
    return len(got) == len(want) and all(same_event(g, w) for g, w in zip(got, want))


EXPECTED_JOBS = [
    "job42 ranks=2 nodes=3 events=7 dropped=7 first=2023-11-14T22:13:20.000001000Z "
    "last=2023-11-14T22:13:20.000012005Z",
    "job7 ranks=0 nodes=1 events=1 dropped=0 first=2023-11-14T22:13:20.000009000Z "
    "last=2023-11-14T22:13:20.000009100Z",
    "job9 ranks=1 nodes=1 events=0 dropped=3 first=- last=-",
]


def client(endpoint, phase, credit):
    r = run([CLIENT, endpoint, phase, str(credit)])
    check(r.returncode == 0, f"client {phase} failed: {r.stderr.strip()}")


def segments(store):
    return sorted(n for n in os.listdir(store) if n.startswith("segment-"))


def first_run(tmp, store, endpoint):
    c = Collector(["--listen", endpoint, "--store", store, "--http", "off"], os.path.join(tmp, "c1.log"))
    check(c.wait_listening(), "collector did not start:\n" + c.text())
    second = run([COLLECTOR, "--listen", f"tcp://127.0.0.1:{free_port()}", "--store", store, "--http", "off"])
    check(second.returncode == 1 and "in use by another collector" in second.stderr,
          f"second collector on the same store: rc {second.returncode} {second.stderr!r}")
    client(endpoint, "first", 64)
    rc = c.stop(signal.SIGTERM)
    log = c.text()
    check(rc == 0, f"collector exit code {rc} after SIGTERM")
    check(f"listening on {endpoint}, store {store}" in log, "startup line missing")
    check("stopped; batches: 26 accepted (34 events), 2 duplicate (5 events), 33 rejected; "
          "6 malformed messages" in log, "final counts wrong:\n" + log)
    check(log.count("malformed batch envelope") == 1,
          "repeated rejections were not rate limited:\n" + log)
    check("checksum mismatch" in log and "unsupported format version 4" in log,
          "rejection reasons not logged")
    check("unknown protocol 'XYZ9'" in log and "unknown type 'FOO'" in log,
          "malformed messages not logged")
    check("29 further problem reports" in log, "suppressed reports not summed:\n" + log)


def second_run(tmp, store, endpoint):
    conf = os.path.join(tmp, "collector.conf")
    with open(conf, "w") as f:
        f.write(f"# collector test config\nlisten = {endpoint}\nstore = {store}\n"
                "log-level = info\n")
    c = Collector(["--config", conf, "--credit", "8", "--segment-size", "4K"],
                  os.path.join(tmp, "c2.log"))
    check(c.wait_listening(), "restarted collector did not start:\n" + c.text())
    check("holds 26 batches from 5 producer streams" in c.text(), "dedup rebuild line missing")
    client(endpoint, "second", 8)
    # Export works while the collector is running and holds the lock.
    live = run([EXPORT, "--store", store, "--jsonl", "-"])
    check(live.returncode == 0 and len(live.stdout.splitlines()) == len(EXPECTED),
          f"export during collection: rc {live.returncode} {live.stderr}")
    rc = c.stop(signal.SIGINT)
    check(rc == 0, f"collector exit code {rc} after SIGINT")
    check("stopped; batches: 60 accepted (60 events), 3 duplicate (6 events), 0 rejected"
          in c.text(), "second run counts wrong:\n" + c.text())
    check(len(segments(store)) >= 2, f"no rotation at 4K: {segments(store)}")


def check_jsonl(tmp, store):
    out = os.path.join(tmp, "events.jsonl")
    r = run([EXPORT, "--store", store, "--jsonl", out])
    check(r.returncode == 0, f"export --jsonl failed: {r.stderr}")
    lines = []
    if os.path.exists(out):
        with open(out) as f:
            lines = f.read().splitlines()
    got = [json.loads(line) for line in lines]
    check(len(got) == len(EXPECTED), f"{len(got)} events exported, expected {len(EXPECTED)}")
    for i, (g, w) in enumerate(zip(got, EXPECTED)):
        check(same_event(g, w), f"event {i}:\n  got  {g}\n  want {w}")
        check(list(g) == list(w), f"event {i} field order {list(g)}")
    check(all(" " not in line.split('"file"')[0] for line in lines), "output is not compact")
    stdout = run([EXPORT, "--store", store, "--jsonl", "-"])
    check(stdout.stdout.splitlines() == lines, "stdout export differs from the file")

    job7 = run([EXPORT, "--store", store, "--job", "job7", "--jsonl", "-"])
    check([json.loads(x) for x in job7.stdout.splitlines()] == [EXPECTED[8]],
          f"--job job7 gave {job7.stdout!r}")
    job42 = run([EXPORT, "-s", store, "-j", "job42", "--jsonl", "-"])
    check([json.loads(x) for x in job42.stdout.splitlines()] == EXPECTED[:8],
          "--job job42 selected the wrong events")
    for node in ("nodeB", "store1"):
        check(f"warning: node '{node}' has no clock samples" in r.stderr,
              f"unaligned node {node} not reported: {r.stderr!r}")
    check("'nodeA'" not in r.stderr, f"nodeA has samples: {r.stderr!r}")
    raw = run([EXPORT, "--store", store, "--jsonl", "-", "--no-align"])
    check(same_events([json.loads(x) for x in raw.stdout.splitlines()], RAW),
          f"--no-align did not give the recorded times: {raw.stdout!r}")
    check(raw.stderr.count(UNREADABLE_WARNING) == 1 and len(raw.stderr.splitlines()) == 1,
          f"--no-align: the unreadable batch is not reported once: {raw.stderr!r}")


def check_clock(store):
    r = run([EXPORT, "--store", store, "--clock"])
    want = ["nodeA samples=81 offset_ns=5 rtt_ns=100 error_ns=50 drift_ppm=+0.000 "
            "first=2023-11-14T22:13:20.000000005Z last=2023-11-14T22:13:20.000000085Z",
            "nodeB samples=0 offset_ns=- rtt_ns=- error_ns=- drift_ppm=- first=- last=-",
            "store1 samples=0 offset_ns=- rtt_ns=- error_ns=- drift_ppm=- first=- last=-"]
    check(r.returncode == 0 and r.stdout.splitlines() == want,
          f"--clock gave rc {r.returncode}:\n{r.stdout}{r.stderr}")


def check_list_jobs(store):
    r = run([EXPORT, "--store", store, "--list-jobs"])
    check(r.returncode == 0 and r.stdout.splitlines() == EXPECTED_JOBS,
          f"--list-jobs gave rc {r.returncode}:\n{r.stdout}{r.stderr}")
    r = run([EXPORT, "--store", store, "--list-jobs", "--job", "job7"])
    check(r.stdout.splitlines() == EXPECTED_JOBS[1:2], f"--list-jobs --job job7: {r.stdout!r}")


def expect_fail(args, rc, text, what):
    env = None
    if rc == 2:
        # common/opts.c exits on a usage error without freeing its getopt
        # table; under the sanitizer build LeakSanitizer would turn exit code
        # 2 into 1.  Usage paths allocate nothing else.
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
    r = run(args, env=env)
    check(r.returncode == rc and text in r.stderr,
          f"{what}: rc {r.returncode} (want {rc}), stderr {r.stderr!r} lacks {text!r}")


def check_errors(tmp, store):
    E = EXPORT
    expect_fail([E, "--jsonl", "-"], 2, "--store DIR is required", "export without --store")
    expect_fail([E, "--store", store], 2, "exactly one of", "export without an output")
    expect_fail([E, "--store", store, "--jsonl", "-", "--list-jobs"], 2, "exactly one of",
                "export with two outputs")
    expect_fail([E, "--store", store, "--clock", "--list-jobs"], 2, "exactly one of",
                "--clock with another output")
    expect_fail([E, "--store", store, "--clock", "--job", "job7"], 2, "takes neither",
                "--clock with --job")
    expect_fail([E, "--store", store, "--verify", "--job", "job7"], 2, "takes neither",
                "--verify with --job")
    expect_fail([E, "--store", store, "--verify", "--clock"], 2, "exactly one of",
                "--verify with another output")
    expect_fail([E, "--store", store, "--bogus"], 2, "unknown option", "unknown option")
    expect_fail([E, "--store", store, "--jsonl", "-", "extra"], 2, "unexpected argument",
                "stray argument")
    expect_fail([E, "--store", os.path.join(tmp, "nope"), "--jsonl", "-"], 1,
                "cannot read store directory", "missing store")
    expect_fail([E, "--store", tmp, "--list-jobs"], 1, "not an iotrace store", "not a store")
    expect_fail([E, "--store", store, "--job", "nojob", "--jsonl", "-"], 1,
                "job 'nojob' has no events", "unknown job")
    expect_fail([E, "--store", store, "--job", "nojob", "--list-jobs"], 1,
                "job 'nojob' has no events", "unknown job in --list-jobs")
    expect_fail([E, "--store", store, "--jsonl", os.path.join(tmp, "no", "dir", "x")], 1,
                "cannot write", "unwritable output")

    C = COLLECTOR
    expect_fail([C], 2, "--store DIR is required", "collector without --store")
    expect_fail([C, "--store", store, "--credit", "0"], 2, "--credit must be", "zero credit")
    expect_fail([C, "--store", store, "--credit", "x"], 2, "expects an integer", "bad credit")
    expect_fail([C, "--store", store, "--segment-size", "1K"], 2, "at least 4K", "tiny segment")
    expect_fail([C, "--store", store, "--log-level", "loud"], 2, "unknown --log-level",
                "bad log level")
    expect_fail([C, "--store", store, "--config", os.path.join(tmp, "none.conf")], 2,
                "cannot read config file", "missing config")
    expect_fail([C, "--store", store, "--listen", "bogus://x"], 1, "cannot listen on",
                "bad endpoint")
    r = run([C, "--help"])
    check(r.returncode == 0 and "--segment-size" in r.stdout, "collector --help")


def damaged_copy(tmp, store, name, offset, xor):
    bad = os.path.join(tmp, name)
    shutil.copytree(store, bad)
    os.remove(os.path.join(bad, "LOCK"))
    path = os.path.join(bad, "segment-00000001.iots")
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ xor]))
    return bad


def check_damage(tmp, store):
    """One bad record costs that record: exports read everything else, say
    where and how much was skipped, and exit 3; the collector starts on the
    store, reporting it; --verify names it."""
    bad = damaged_copy(tmp, store, "crc", 16 + 24 + 3, 0x01)
    r = run([EXPORT, "--store", bad, "--jsonl", "-"])
    good = run([EXPORT, "--store", store, "--jsonl", "-"])
    check(r.returncode == 3 and "segment-00000001.iots: CRC mismatch" in r.stderr and "at offset 16" in r.stderr
          and "1 damaged records skipped" in r.stderr,
          f"damaged payload: rc {r.returncode}, stderr {r.stderr!r}")
    check(0 < len(r.stdout.splitlines()) < len(good.stdout.splitlines()),
          f"damaged payload: {len(r.stdout.splitlines())} rows of {len(good.stdout.splitlines())}")
    r = run([EXPORT, "--store", bad, "--list-jobs"])
    check(r.returncode == 3 and "at offset 16" in r.stderr, f"damage offset not reported: {r.stderr!r}")
    c = Collector(["--listen", f"tcp://127.0.0.1:{free_port()}", "--http", "off", "--store", bad],
                  os.path.join(tmp, "damaged-collector.log"))
    check(c.wait_listening() and "at offset 16" in c.text(),
          "the collector did not start on a store with a damaged record, or did not say so:\n" + c.text())
    check(c.stop(signal.SIGTERM) == 0, "collector on a damaged store: " + c.text())
    bad = damaged_copy(tmp, store, "magic", 0, 0x20)
    r = run([EXPORT, "--store", bad, "--list-jobs"])
    check(r.returncode == 3 and "bad file magic" in r.stderr and r.stdout,
          f"bad file magic: rc {r.returncode}, stderr {r.stderr!r}")
    # --verify reads everything: the damaged copy has a bad CRC, the
    # store itself holds the one batch whose body does not decode.
    r = run([EXPORT, "--store", os.path.join(tmp, "crc"), "--verify"])
    check(r.returncode == 1 and "damage " in r.stdout and "CRC mismatch" in r.stdout
          and "damaged_records 1" in r.stdout and "verdict damaged" in r.stdout,
          f"--verify of a damaged store: {r.stdout!r}")
    r = run([EXPORT, "--store", store, "--verify"])
    want = ["batches 86", "unreadable_batches 1", "unreadable_events 3", "end complete",
            "manifest yes", "verdict damaged"]
    check(r.returncode == 1 and all(w in r.stdout.splitlines() for w in want),
          f"--verify of the test store: rc {r.returncode} {r.stdout!r}")
    # The last segment cut short (no collector holds the store): what is
    # before the cut is read, and the loss is said.
    for name, cut, what in (("cut-record", -10, "ends inside a record"),
                            ("cut-empty", 0, "ends inside its file header")):
        bad = os.path.join(tmp, name)
        shutil.copytree(store, bad)
        last = os.path.join(bad, segments(bad)[-1])
        os.truncate(last, os.path.getsize(last) + cut if cut < 0 else cut)
        r = run([EXPORT, "--store", bad, "--list-jobs"])
        check(r.returncode == 3 and what in r.stderr and "a crash or a truncation" in r.stderr,
              f"{name}: rc {r.returncode}, stderr {r.stderr!r}")
        r = run([EXPORT, "--store", bad, "--verify"])
        check(r.returncode == 1 and f"end {segments(bad)[-1]} cut at offset" in r.stdout
              and "verdict damaged" in r.stdout, f"{name} --verify: {r.stdout!r}")


def check_empty_store(tmp):
    """A store that holds no batch exports nothing, without an error, in
    every format that takes no job (under UBSan, the sort of no rows was
    an error)."""
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    store = os.path.join(tmp, "empty-store")
    c = Collector(["--listen", endpoint, "--store", store, "--http", "off"], os.path.join(tmp, "empty.log"))
    check(c.wait_listening(), "collector on an empty store did not start:\n" + c.text())
    check(c.stop(signal.SIGTERM) == 0, "collector on an empty store: " + c.text())
    for fmt in ("--jsonl", "--csv"):
        r = run([EXPORT, "--store", store, fmt, "-"])
        check(r.returncode == 0 and r.stderr == "" and len(r.stdout.splitlines()) <= 1,
              f"{fmt} of an empty store: rc {r.returncode}, {r.stdout!r}, {r.stderr!r}")
    trace = os.path.join(tmp, "empty-trace.json")
    r = run([EXPORT, "--store", store, "--chrome", trace])
    check(r.returncode == 0 and "runtime error" not in r.stderr and "0 slices" in r.stderr,
          f"--chrome of an empty store: rc {r.returncode}, {r.stderr!r}")
    if r.returncode == 0:
        with open(trace) as f:
            check(json.load(f)["traceEvents"] == [], "--chrome of an empty store: events in it")
    r = run([EXPORT, "--store", store, "--list-jobs"])
    check(r.returncode == 0 and r.stdout == "", f"--list-jobs of an empty store: {r.stdout!r} {r.stderr!r}")


def fuzz_run(tmp):
    """Thousands of damaged batches against a fresh store: all answered, no crash."""
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    store = os.path.join(tmp, "fuzz-store")
    c = Collector(["--listen", endpoint, "--store", store, "--http", "off"], os.path.join(tmp, "fuzz.log"))
    check(c.wait_listening(), "fuzz collector did not start:\n" + c.text())
    client(endpoint, "fuzz", 64)
    rc = c.stop(signal.SIGTERM)
    check(rc == 0, f"collector exit code {rc} after the fuzz run:\n" + c.text())
    r = run([EXPORT, "--store", store, "--jsonl", "-"])
    check(r.returncode == 0, f"export of the fuzz store: {r.stderr}")


def check_old_stores(tmp):
    """Stores written by earlier wire versions export event for event what
    the build that wrote them exported (committed beside them): version 1
    (only times delta coded; the HTTP fuzzer's store) and version 2 (every
    column coded, each written in full; tests/mpiio_mix, 2 ranks)."""
    here = os.path.dirname(os.path.abspath(__file__))
    for version, name in ((1, "http-store"), (2, "v2-store")):
        old = os.path.join(tmp, f"v{version}-store")
        os.mkdir(old)
        shutil.copy(os.path.join(here, "fuzz", name + ".iots"),
                    os.path.join(old, "segment-00000001.iots"))
        r = run([EXPORT, "--store", old, "--jsonl", "-"])
        check(r.returncode == 0, f"export of a version {version} store failed: {r.stderr}")
        with open(os.path.join(here, "fuzz", name + ".jsonl")) as f:
            want = f.read()
        check(r.stdout == want, f"a version {version} store exports differently:\n" + r.stdout[:2000])


def main():
    tmp = tempfile.mkdtemp(prefix="iot-collector-test-")
    store = os.path.join(tmp, "store")
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    try:
        first_run(tmp, store, endpoint)
        second_run(tmp, store, endpoint)
        check_jsonl(tmp, store)
        check_list_jobs(store)
        check_clock(store)
        check_errors(tmp, store)
        check_damage(tmp, store)
        check_old_stores(tmp)
        check_empty_store(tmp)
        fuzz_run(tmp)
    finally:
        if failures:
            print(f"{len(failures)} checks failed; files kept in {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
