#!/usr/bin/env python3
"""Clock alignment with a real clock shift.

The collector runs on the machine's clock.  A "node" -- an iotrace-agent
and a synthetic producer stamping its events with CLOCK_REALTIME -- runs
under libfaketime (the `faketime` wrapper, so that both processes share one
fake clock, rate included), 3 s ahead and, in the drift case, running 1 %
fast.  The producer also writes, per MPI-IO event, the kernel's true
CLOCK_REALTIME read by a raw system call that libfaketime does not see.

Checks: the agent's offset estimate matches the shift; iotrace-export --clock
reports it per node with rtt, error bound and drift; --jsonl times are on the
collector's clock (inside the run's real-time window, each within the
reported error bound of its true time) while --no-align shows them ahead by
the shift; with drift, the samples show it and interpolation follows it; a
producer that names another node than its agent's is stored as its
agent's node (a producer's node is its agent's, whatever it says) and
aligned with that agent's clock.

    clock-test.py CASE COLLECTOR AGENT PRODUCER EXPORT      CASE: shift | drift
Exit 77 (skipped) when the faketime wrapper is not installed.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import check, failures, free_port  # noqa: E402

CASE, COLLECTOR, AGENT, PRODUCER, EXPORT = sys.argv[1:6]
SHIFT_NS = 3_000_000_000
RATE = {"shift": 1.0, "drift": 1.01}[CASE]
FAKETIME_SPEC = "+3s" if RATE == 1.0 else f"+3s x{RATE}"
NODE, OTHER = "fakenode", "othernode"
# The true time is read right after the event's time; what else separates
# them (scheduling, ASan) stays far below this.
STAMP_SLACK_NS = 1_000_000


# Runs under faketime: the agent and, once it has its first clock sample,
# the producers; after the last event two more samples, so that every event
# lies between samples; then a clean stop.
NODE_SCRIPT = r"""
set -u
T=$1 AGENT=$2 PRODUCER=$3 PORT=$4 NODE=$5 OTHER=$6
SOCK=ipc://$T/agent.sock
samples() { grep -c 'clock: offset' "$T/agent.log" 2>/dev/null || true; }
wait_samples() {
    local deadline=$((SECONDS + 20))
    until [ "$(samples)" -ge "$1" ]; do
        [ $SECONDS -ge $deadline ] && { echo "node: no clock sample $1" >&2; kill $APID; exit 1; }
        sleep 0.05
    done
}
"$AGENT" --collector tcp://127.0.0.1:$PORT --listen $SOCK --node "$NODE" \
    --clock-interval 1s --stats-interval 1s 2>"$T/agent.log" &
APID=$!
trap 'kill $APID 2>/dev/null' EXIT
wait_samples 1
"$PRODUCER" --agent $SOCK --node "$NODE" --job clockjob --batches 20 --events-per-batch 2 \
    --rate 10 --realtime --truth "$T/truth.txt" >"$T/producer.out" &
PPID1=$!
"$PRODUCER" --agent $SOCK --node "$OTHER" --job clockother --batches 2 --events-per-batch 2 \
    --realtime >"$T/other.out" || { echo "node: producer for $OTHER failed" >&2; exit 1; }
wait $PPID1 || { echo "node: producer failed" >&2; exit 1; }
wait_samples $(($(samples) + 2))
kill -TERM $APID
wait $APID
"""


def run_node(tmp, port):
    script = os.path.join(tmp, "node.sh")
    with open(script, "w") as f:
        f.write(NODE_SCRIPT)
    env = dict(os.environ)
    # Only CLOCK_REALTIME is shifted; timeouts stay on the true monotonic clock.
    env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
    # An ASan build must accept libfaketime ahead of its runtime.
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0").lstrip(":")
    cmd = ["faketime", "-f", FAKETIME_SPEC, "bash", script, tmp, AGENT, PRODUCER, str(port),
           NODE, OTHER]
    node = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = node.communicate(timeout=45)
    except subprocess.TimeoutExpired:
        os.killpg(node.pid, signal.SIGKILL)
        out, err = node.communicate()
        err += "\nnode timed out"
    # The wrapper shares its clock with its children through shared memory
    # named after its pid, which a killed wrapper leaves behind.
    for name in (f"faketime_shm_{node.pid}", f"sem.faketime_sem_{node.pid}"):
        try:
            os.unlink(os.path.join("/dev/shm", name))
        except OSError:
            pass
    return subprocess.CompletedProcess(cmd, node.returncode, out, err)


def export(store, *args):
    r = subprocess.run([EXPORT, "--store", store] + list(args), capture_output=True, text=True,
                       timeout=60)
    check(r.returncode == 0, f"iotrace-export {' '.join(args)}: rc {r.returncode} {r.stderr}")
    return r


def clock_line(text, node):
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == node:
            return dict(f.split("=", 1) for f in fields[1:])
    return None


def read_truth(path):
    truth = {}
    with open(path) as f:
        for line in f:
            callid, fake, true = line.split()
            truth[callid] = (int(fake), int(true))
    return truth


def check_clock_report(report):
    c = clock_line(report, NODE)
    if not check(c is not None, f"--clock has no line for {NODE}:\n{report}"):
        return None
    print(f"--clock: {NODE} {' '.join(f'{k}={v}' for k, v in c.items())}")
    offset, rtt, error = int(c["offset_ns"]), int(c["rtt_ns"]), int(c["error_ns"])
    check(int(c["samples"]) >= 5, f"only {c['samples']} clock samples")
    check(0 < rtt < 50_000_000, f"implausible rtt {rtt}")
    check(error >= (rtt + 1) // 2, f"error bound {error} below rtt/2")
    check(error < 5_000_000, f"error bound {error} ns is not a few ms at most")
    if CASE == "shift":
        check(abs(offset + SHIFT_NS) < 5_000_000, f"offset {offset} is not -3 s within 5 ms")
        check(abs(float(c["drift_ppm"])) < 200, f"drift {c['drift_ppm']} ppm without a rate")
    else:
        # 1 % fast: the node gains 10 ms per second on top of the 3 s.
        check(-SHIFT_NS - 200_000_000 < offset < -SHIFT_NS - 10_000_000,
              f"offset {offset} does not show 3 s plus the drift")
        check(abs(float(c["drift_ppm"]) - 10000) < 300,
              f"drift {c['drift_ppm']} ppm, expected about +10000")
    check(clock_line(report, OTHER) is None,
          f"{OTHER}, a name only a producer gave, is listed as a node:\n{report}")
    return c


def check_events(aligned, raw, truth, c, w0, w1):
    error = int(c["error_ns"])
    mine = [e for e in aligned if e["node"] == NODE and e["job"] == "clockjob"]
    check(len(mine) == 40, f"{len(mine)} events of {NODE} exported, expected 40")
    outside = [e for e in mine if not (w0 <= e["t_start"] <= e["t_end"] <= w1)]
    check(not outside, f"{len(outside)} aligned events outside the run's real-time window "
                       f"[{w0}, {w1}], e.g. {outside[:1]}")
    raw_by_callid = {e["callid"]: e for e in raw
                     if e["node"] == NODE and e["job"] == "clockjob" and e["kind"] == "mpiio"}
    worst, worst_constant = 0, 0
    last_offset = int(c["offset_ns"])
    for e in mine:
        if e["kind"] != "mpiio":
            continue
        fake, true = truth[e["callid"]]
        r = raw_by_callid[e["callid"]]
        check(r["t_start"] == fake, f"--no-align changed the time of {e['callid']}")
        ahead = fake - true
        if CASE == "shift":
            check(abs(ahead - SHIFT_NS) < STAMP_SLACK_NS, f"raw time {ahead} ns ahead, not 3 s")
        else:
            check(SHIFT_NS <= ahead < SHIFT_NS + 300_000_000, f"raw time {ahead} ns ahead")
        worst = max(worst, abs(e["t_start"] - true))
        worst_constant = max(worst_constant, abs(fake + last_offset - true))
    print(f"aligned vs true time: worst {worst} ns (error bound {error} ns); "
          f"a constant offset would be off by {worst_constant} ns")
    check(worst <= error + STAMP_SLACK_NS,
          f"aligned times are up to {worst} ns from the true time, bound {error} ns")
    if CASE == "drift":
        # The events span seconds: without interpolation the drift would show.
        check(worst_constant > 10_000_000,
              f"drift too small to test interpolation ({worst_constant} ns)")


def check_forwarded_node(aligned, raw, c, stderr, w0, w1):
    """A producer that calls its node something else than the agent that
    forwards its batches is that agent's node, on its clock."""
    named = [e for e in aligned if e["job"] == "clockother"]
    check(all(e["node"] == NODE for e in named),
          f"a producer's own node name was kept: {sorted({e['node'] for e in named})}")
    other = sorted((e["callid"], e["kind"], e["t_start"]) for e in named)
    other_raw = sorted((e["callid"], e["kind"], e["t_start"]) for e in raw
                       if e["job"] == "clockother")
    check(len(other) == 4 and len(other_raw) == 4,
          f"{len(other)} events of the producer naming {OTHER}, expected 4")
    offset = int(c["offset_ns"]) if c else -SHIFT_NS
    for a, r in zip(other, other_raw):
        moved = a[2] - r[2]
        if CASE == "shift":
            check(abs(moved - offset) < 5_000_000,
                  f"{OTHER}'s event moved by {moved} ns, not by its agent's offset {offset}")
        else:  # the offset at the event's time: 3 s plus what the drift added by then
            check(-SHIFT_NS - 300_000_000 < moved < -SHIFT_NS + 5_000_000,
                  f"{OTHER}'s event moved by {moved} ns, not by about -3 s")
        check(w0 <= a[2] <= w1, f"{OTHER}'s aligned event at {a[2]} is outside [{w0}, {w1}]")
    check(f"node '{OTHER}' has no clock samples" not in stderr and
          f"node '{NODE}' has no clock samples" not in stderr,
          f"a forwarded node is reported as unaligned: {stderr!r}")


def check_agent_log(tmp):
    log = open(os.path.join(tmp, "agent.log")).read()
    stats = [l for l in log.splitlines() if "stats:" in l][-1]
    m = re.search(r"clock_samples=(\d+) clock_offset_ns=(-?\d+) clock_rtt_ns=(\d+)", stats)
    check(m is not None, f"no clock figures in the agent's stats line: {stats}")
    if m:
        check(abs(int(m.group(2)) + SHIFT_NS) < 300_000_000,
              f"agent's stats show offset {m.group(2)}")
    check(re.search(r"info: clock: offset -\d+ ns to the collector, rtt \d+ ns, error bound \d+ ns",
                    log), "agent does not log its bursts")
    check("all batches acknowledged" in log, "agent did not drain")


def main():
    if not shutil.which("faketime"):
        print("faketime (package faketime) not installed; skipped")
        return 77
    tmp = tempfile.mkdtemp(prefix="iotrace-clock-test-")
    store, port = os.path.join(tmp, "store"), free_port()
    clog = open(os.path.join(tmp, "collector.log"), "w")
    coll = subprocess.Popen([COLLECTOR, "--http", "off", "--store", store, "--listen", f"tcp://127.0.0.1:{port}",
                             "--log-level", "debug"], stderr=clog)
    try:
        w0 = time.time_ns()
        node = run_node(tmp, port)
        w1 = time.time_ns()
        check(node.returncode == 0, f"node under faketime failed ({node.returncode}): "
                                    f"{node.stderr}\n{open(os.path.join(tmp, 'agent.log')).read()}")
    finally:
        coll.send_signal(signal.SIGTERM)
        coll.wait(timeout=30)
        clog.close()
    if not failures:
        check_agent_log(tmp)
        c = check_clock_report(export(store, "--clock").stdout)
        res = export(store, "--jsonl", "-")
        aligned = [json.loads(l) for l in res.stdout.splitlines()]
        raw = [json.loads(l) for l in export(store, "--jsonl", "-", "--no-align").stdout.splitlines()]
        if c:
            check_events(aligned, raw, read_truth(os.path.join(tmp, "truth.txt")), c, w0, w1)
        check_forwarded_node(aligned, raw, c, res.stderr, w0, w1)
        clog_text = open(os.path.join(tmp, "collector.log")).read()
        check(f"agent {NODE} clock: offset -" in clog_text, "collector does not log the samples")
    if failures:
        print(f"{len(failures)} checks failed; files kept in {tmp}", file=sys.stderr)
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"PASS ({CASE})")
    return 0


sys.exit(main())
