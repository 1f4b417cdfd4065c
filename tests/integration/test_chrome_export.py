#!/usr/bin/env python3
"""`iotrace-export --chrome` end to end (docs/export.md, "--chrome").

A real traced MPI job (mpiexec, libiotrace-client preloaded, a real agent and
collector) runs tests/mpi/mpiio_loop while tests/server/registry_brick, a
storage server without a file system, reads the CallID registry and records
disk operations tagged with the calls in progress through libiotrace-server;
iotrace-producer adds a rank to the job whose batches are lost in transit, so
that the job has drop records.  The trace file must

- validate against a JSON schema of the trace-event format (JSON Object
  Format: traceEvents, displayTimeUnit, metadata; M, X, i, s, f events);
- hold every event of `--jsonl --job` exactly once as an X slice (args equal
  to the JSON Lines object, so every MPI-IO call once with its CallID; ts and
  dur its times to the nanosecond) and every drop record as an instant;
- have as many flows as `--stats --format json` counts matched disk
  operations (and --jsonl has call -> disk-operation pairs), each flow's start
  inside the MPI-IO call's slice and its end inside the disk operation's, both
  the innermost slices there, with the same CallID;
- name its tracks as designed ("node N · ranks" / "rank R", "node N · brick
  B" / "brick B · thread T", sort indices), with slices nesting on every
  track;
- load in headless Chromium (JSON.parse in a page, the structure checked
  again in the browser; chrome://tracing is looked for and reported);
- keep the exporter's peak RSS flat from a store to one with ten times the
  events (iotrace-producer's), where --jsonl's grows.
"""
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import (Deployment, end_brick, headless_chromium, mpirun, parse_bins,  # noqa: E402
                     sanitizer_env)

NPROCS, BLOCK = 4, 1 << 20
RUN_S, MIN_SERVED = 2.0, 300
# Peak RSS of --chrome may grow by at most this from the small store to the
# large one (docs/export.md, "Memory"); --jsonl grows by ~100 bytes per event.
# What the pipeline holds is the events of --lateness (and the calls of
# --grace) at the producers' rate (200K events/s here), whatever the total.
RSS_BOUND_KB, LATENESS_MS = 8 * 1024, 100
SMALL, LARGE = (10, 2048), (100, 2048)  # (batches, events per batch) per producer

if "/usr/lib/python3/dist-packages" not in sys.path:
    sys.path.append("/usr/lib/python3/dist-packages")


def fail(msg):
    raise AssertionError(msg)


NUM = {"type": "number"}
INT = {"type": "integer", "minimum": 0}
SCHEMA = {
    "type": "object",
    "required": ["traceEvents", "displayTimeUnit", "metadata"],
    "additionalProperties": False,
    "properties": {
        "traceEvents": {"type": "array", "items": {"$ref": "#/$defs/event"}},
        "displayTimeUnit": {"enum": ["ms", "ns"]},
        "metadata": {"type": "object"},
    },
    "$defs": {
        "event": {
            "type": "object",
            "required": ["ph", "pid", "tid"],
            "properties": {"ph": {"enum": ["M", "X", "i", "s", "f"]}, "pid": INT, "tid": INT},
            "allOf": [
                {"if": {"properties": {"ph": {"const": "M"}}},
                 "then": {"required": ["name", "args"], "properties": {
                     "name": {"enum": ["process_name", "process_sort_index", "thread_name",
                                       "thread_sort_index"]},
                     "args": {"type": "object", "minProperties": 1, "maxProperties": 1,
                              "properties": {"name": {"type": "string", "minLength": 1},
                                             "sort_index": {"type": "integer"}}}}}},
                {"if": {"properties": {"ph": {"const": "X"}}},
                 "then": {"required": ["ts", "dur", "name", "cat", "args"],
                          "properties": {"ts": NUM, "dur": {"type": "number", "minimum": 0},
                                         "name": {"type": "string", "minLength": 1},
                                         "cat": {"enum": ["mpiio", "posix", "disk"]},
                                         "args": {"type": "object",
                                                  "required": ["kind", "callid", "job"]}}}},
                {"if": {"properties": {"ph": {"const": "i"}}},
                 "then": {"required": ["ts", "s", "name", "cat", "args"],
                          "properties": {"ts": NUM, "s": {"enum": ["t", "p", "g"]},
                                         "cat": {"const": "drop"}}}},
                {"if": {"properties": {"ph": {"enum": ["s", "f"]}}},
                 "then": {"required": ["ts", "id", "name", "cat"],
                          "properties": {"ts": NUM, "id": INT, "cat": {"const": "flow"},
                                         "name": {"enum": ["Read Path", "Write Path",
                                                           "Other Path"]}}}},
                {"if": {"properties": {"ph": {"const": "f"}}},
                 "then": {"required": ["bp"], "properties": {"bp": {"const": "e"}}}},
            ],
        },
    },
}


def run_export(bins, *args, timeout=300):
    res = subprocess.run([bins["export"], *args], capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        fail(f"iotrace-export {' '.join(args)} exited {res.returncode}: {res.stderr}")
    return res


def ns(us):
    """A ts or dur (microseconds, three decimals) back in nanoseconds."""
    return round(us * 1000)


# ---- the traced job ------------------------------------------------------


def traced_job(bins, dep, job):
    registry = f"/iotrace-chrome-{os.getpid()}"
    env = {"IOTRACE_AGENT": dep.endpoint, "IOTRACE_JOB_ID": job, "IOTRACE_REGISTRY": registry}
    stop = os.path.join(dep.tmp, "stop")
    brick = subprocess.Popen([bins["brick"], f"{dep.node}:/bricks/b0", "mpiio_loop", stop],
                             env=dict(os.environ, **env, **sanitizer_env(bins)),
                             stdout=subprocess.PIPE, text=True)
    try:
        line = brick.stdout.readline()
        if not line.startswith("watching"):
            fail(f"registry_brick did not start: {line!r}")
        # Enough: RUN_S seconds of the loop and MIN_SERVED operations (a
        # loaded machine may take longer to start the ranks).
        served = threading.Event()

        def watch():
            for line in brick.stdout:
                if line.startswith("served ") and int(line.split()[1]) >= MIN_SERVED:
                    served.set()
                if line.startswith("recorded"):
                    tail.append(line)
        tail = []
        reader = threading.Thread(target=watch, daemon=True)
        reader.start()

        def stop_when_done():
            time.sleep(RUN_S)
            served.wait(timeout=120)
            open(stop, "w").close()
        stopper = threading.Thread(target=stop_when_done, daemon=True)
        stopper.start()
        res = mpirun(bins, NPROCS, [bins["loop_app"], os.path.join(dep.tmp, "data"), str(BLOCK),
                                    stop], env=env, timeout=180)
        stopper.join()
        if res.returncode != 0:
            fail(f"mpiio_loop failed: {res.stdout}{res.stderr}")
        brick.wait(timeout=60)
        reader.join(timeout=10)
        out = "".join(tail)
    finally:
        end_brick(brick, registry)
    m = re.search(r"recorded (\d+) dropped (\d+)", out)
    if not m or brick.returncode != 0:
        fail(f"registry_brick: {out!r} (exit {brick.returncode})")
    recorded = int(m.group(1))
    print(f"registry_brick: {m.group(0)}")
    if recorded < 10 or m.group(2) != "0":
        fail(f"registry_brick served only {recorded} calls")
    lost = subprocess.run([bins["producer"], "--agent", dep.endpoint, "--node", dep.node,
                           "--job", job, "--rank", "100", "--batches", "5",
                           "--events-per-batch", "16", "--lose", "2"],
                          capture_output=True, text=True, check=True).stdout
    lost = int(lost.split("lost_events=")[1].split()[0])
    # Everything stored: the disk operations, the drop records, and the MPI-IO
    # events no longer changing.
    last = []

    def settled(ev):
        nonlocal last
        done = (sum(e["kind"] == "disk" for e in ev) == recorded and
                sum(e["dropped"] for e in ev if e["kind"] == "drop") == lost and ev == last)
        last = ev
        return done
    dep.wait_for(settled, job=job, timeout=60)
    print(f"ok: job {job}: {NPROCS} ranks, {recorded} disk operations served from the registry, "
          f"{lost} events lost in transit")
    return recorded, lost


# ---- the checks ----------------------------------------------------------


def canon(o):
    return json.dumps(o, sort_keys=True)


def check_schema(trace):
    import jsonschema  # python3-jsonschema (deploy/install-deps.sh)
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    errors = list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(trace))
    if errors:
        fail(f"{len(errors)} schema violations, first: {errors[0].message} at "
             f"{list(errors[0].absolute_path)}")
    print(f"ok: the file validates against the trace-event schema "
          f"({len(trace['traceEvents'])} events)")


def check_events(trace, events):
    evs, meta = trace["traceEvents"], trace["metadata"]
    t0 = meta["time0_ns"]
    if t0 != min(e["t_start"] for e in events):
        fail(f"time0_ns {t0} is not the first event's start")
    slices = [e for e in evs if e["ph"] == "X"]
    want = collections.Counter(canon(e) for e in events if e["kind"] != "drop")
    got = collections.Counter(canon(e["args"]) for e in slices)
    if got != want:
        fail(f"slices differ from --jsonl: missing {list((want - got).elements())[:2]}, "
             f"extra {list((got - want).elements())[:2]}")
    for e in slices:
        a = e["args"]
        if (ns(e["ts"]) != a["t_start"] - t0 or ns(e["dur"]) != a["t_end"] - a["t_start"]
                or e["name"] != a["func"] or e["cat"] != a["kind"]):
            fail(f"slice {e} does not carry its event's times, function and kind")
    calls = [a["args"] for a in slices if a["cat"] == "mpiio"]
    ids = collections.Counter((a["job"], a["callid"], a["func"], a["mpi_rank"], a["t_start"])
                              for a in calls)
    if any(n != 1 for n in ids.values()) or any(not re.fullmatch(r"0x[0-9a-f]+", a["callid"])
                                                  for a in calls):
        fail("an MPI-IO call appears twice or without a hex CallID")
    drops = [e for e in events if e["kind"] == "drop"]
    instants = [e for e in evs if e["ph"] == "i"]
    if (collections.Counter(canon(e["args"]) for e in instants) !=
            collections.Counter(canon(e) for e in drops)):
        fail(f"instants {instants} are not the drop records {drops}")
    if meta["lost_events"] != sum(d["dropped"] for d in drops) or not all(
            e["name"].startswith(f"lost {e['args']['dropped']} event") for e in instants):
        fail(f"loss not shown: metadata {meta}, instants {instants}")
    print(f"ok: {len(slices)} slices = the job's --jsonl events ({len(calls)} MPI-IO calls, each "
          f"once with its CallID), exact to the ns; {len(instants)} drop instants, "
          f"{meta['lost_events']} events lost in the metadata")
    return slices


def innermost(tracks, key, ts):
    """The slice of a track containing ts with the latest start (the
    innermost, as slices on a track nest)."""
    best = None
    for e in tracks[key]:
        if e["ts"] <= ts <= e["ts"] + e["dur"] and (best is None or e["ts"] >= best["ts"]):
            best = e
    return best


def check_flows(trace, slices, events, stats):
    evs = trace["traceEvents"]
    starts = {e["id"]: e for e in evs if e["ph"] == "s"}
    ends = {e["id"]: e for e in evs if e["ph"] == "f"}
    if len(starts) != sum(e["ph"] == "s" for e in evs) or set(starts) != set(ends):
        fail("flow ids are not unique per pair, or a flow has one end only")
    job = stats["jobs"][0]
    matched = sum(s["ops"] for s in job["servers"].values()) - job["unmatched_disk_ops"]
    calls = {(e["job"], e["callid"]) for e in events if e["kind"] == "mpiio"}
    pairs = sum(1 for e in events if e["kind"] == "disk" and (e["job"], e["callid"]) in calls)
    meta = trace["metadata"]
    if not len(starts) == matched == pairs == meta["flows"] == meta["pairs"] or matched == 0:
        fail(f"{len(starts)} flows, --stats matched {matched} disk operations, --jsonl has "
             f"{pairs} pairs, metadata {meta['flows']}/{meta['pairs']}")
    tracks = collections.defaultdict(list)
    for e in slices:
        tracks[(e["pid"], e["tid"])].append(e)
    seen = collections.Counter()
    for i, s in starts.items():
        f = ends[i]
        call = innermost(tracks, (s["pid"], s["tid"]), s["ts"])
        disk = innermost(tracks, (f["pid"], f["tid"]), f["ts"])
        if not call or call["cat"] != "mpiio" or not disk or disk["cat"] != "disk":
            fail(f"flow {i}: start binds to {call}, end to {disk}")
        if call["args"]["callid"] != disk["args"]["callid"] or s["name"] != f["name"]:
            fail(f"flow {i} joins CallID {call['args']['callid']} to {disk['args']['callid']}")
        kind = {"readv": "Read Path", "writev": "Write Path"}.get(disk["name"], "Other Path")
        if s["name"] != kind:
            fail(f"flow {i} to a {disk['name']} is named {s['name']}")
        seen[kind] += 1
    print(f"ok: {len(starts)} flows = --stats' {matched} matched disk operations = --jsonl's "
          f"pairs, each from inside its call's slice to inside its disk operation's, same "
          f"CallID ({dict(seen)})")


def check_tracks(trace, node):
    evs = trace["traceEvents"]
    meta = collections.defaultdict(dict)
    for e in evs:
        if e["ph"] == "M":
            meta[(e["pid"], e["tid"] if e["name"].startswith("thread") else None)][e["name"]] = \
                e["args"]
    processes = {p: m["process_name"]["name"] for (p, t), m in meta.items() if t is None}
    threads = {(p, t): m["thread_name"]["name"] for (p, t), m in meta.items() if t is not None}
    if any("process_sort_index" not in m and "thread_sort_index" not in m for m in meta.values()):
        fail("a process or thread without its sort index")
    used = {(e["pid"], e["tid"]) for e in evs if e["ph"] in "Xisf"}
    if used - set(threads) or {p for p, _ in used} - set(processes):
        fail(f"events on unnamed tracks: {sorted(used - set(threads))[:3]}")
    if len({t for _, t in threads}) != len(threads) or set(processes) & {t for _, t in threads}:
        fail("thread ids repeat, or equal a process id")
    ranks_pid = [p for p, n in processes.items() if n == f"node {node} \u00b7 ranks"]
    brick_pid = [p for p, n in processes.items() if n == f"node {node} \u00b7 brick b0"]
    if len(ranks_pid) != 1 or len(brick_pid) != 1:
        fail(f"process names: {sorted(processes.values())}")
    rank_names = sorted(n for (p, t), n in threads.items() if p == ranks_pid[0])
    want = sorted([f"rank {r}" for r in range(NPROCS)] + ["rank 100"])
    if [n for n in rank_names if "lane" not in n] != want:
        fail(f"rank tracks: {rank_names}")
    order = sorted((meta[(ranks_pid[0], t)]["thread_sort_index"]["sort_index"], n)
                   for (p, t), n in threads.items() if p == ranks_pid[0] and "lane" not in n)
    if [n for _, n in order] != sorted(want, key=lambda n: int(n.split()[1])):
        fail(f"ranks do not sort numerically: {order}")
    brick_threads = [n for (p, t), n in threads.items() if p == brick_pid[0]]
    if len(brick_threads) < 2 or not all(re.fullmatch(r"brick b0 \u00b7 thread \d+", n)
                                         for n in brick_threads):
        fail(f"brick threads: {brick_threads}")
    # On every track the slices nest or follow each other, never cross.
    spans = collections.defaultdict(list)
    for e in evs:
        if e["ph"] == "X":
            spans[(e["pid"], e["tid"])].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
    for key, ss in spans.items():
        stack = []
        for s, t in sorted(ss, key=lambda x: (x[0], -x[1])):
            while stack and stack[-1] <= s:
                stack.pop()
            if stack and stack[-1] < t:
                fail(f"track {key}: [{s}, {t}] crosses a slice ending at {stack[-1]}")
            stack.append(t)
    print(f"ok: tracks: {sorted(processes.values())}; {len(threads)} threads "
          f"({', '.join(order_n for _, order_n in order)}, {len(brick_threads)} brick threads), "
          "slices nest on each")


BROWSER_CHECK = """
const text = arguments[0];
const t = JSON.parse(text);
const out = {errors: [], counts: {}, flows: 0};
const err = m => { if (out.errors.length < 5) out.errors.push(m); };
if (!Array.isArray(t.traceEvents)) err('traceEvents is not an array');
if (t.displayTimeUnit !== 'ns') err('displayTimeUnit');
const named = new Set(), sflow = new Map(), fflow = new Map();
for (const e of t.traceEvents) {
  out.counts[e.ph] = (out.counts[e.ph] || 0) + 1;
  if (!Number.isInteger(e.pid) || !Number.isInteger(e.tid)) err('pid/tid ' + JSON.stringify(e));
  if (e.ph === 'M') { if (e.name === 'thread_name') named.add(e.pid + '/' + e.tid); continue; }
  if (typeof e.ts !== 'number' || !isFinite(e.ts)) err('ts ' + JSON.stringify(e));
  if (e.ph === 'X' && !(e.dur >= 0)) err('dur ' + JSON.stringify(e));
  if (e.ph === 's') sflow.set(e.id, e);
  if (e.ph === 'f') { fflow.set(e.id, e); if (e.bp !== 'e') err('bp'); }
}
for (const e of t.traceEvents)
  if (e.ph !== 'M' && !named.has(e.pid + '/' + e.tid)) {
    err('unnamed track ' + e.pid + '/' + e.tid);
    break;
  }
for (const [id, s] of sflow) {
  const f = fflow.get(id);
  if (!f || f.name !== s.name || f.cat !== s.cat) err('flow ' + id); else out.flows++;
}
out.bytes = text.length;
return out;
"""


def check_chromium(path, want_counts, want_flows, tmp):
    driver = headless_chromium(tmp)
    try:
        # chrome://tracing (Catapult) is gone from current Chromium: say what
        # this one has, and check the file in a page instead.
        driver.get("chrome://tracing")
        time.sleep(1)
        has_viewer = driver.execute_script(
            "return typeof tr !== 'undefined' || !!document.querySelector('tr-ui-timeline-view')")
        version = driver.capabilities.get("browserVersion")
        driver.get("about:blank")
        got = driver.execute_script(BROWSER_CHECK, open(path).read())
    finally:
        driver.quit()
    if got["errors"] or got["counts"] != want_counts or got["flows"] != want_flows:
        fail(f"Chromium: {got}, want counts {want_counts} and {want_flows} flows")
    print(f"ok: Chromium {version} parsed the file ({got['bytes']} bytes, {got['counts']}, "
          f"{got['flows']} flows with both ends) and found it sound; chrome://tracing "
          f"{'has' if has_viewer else 'has no'} trace viewer in this Chromium")


# ---- memory --------------------------------------------------------------


# A fresh interpreter forks the exporter and reports its peak RSS: a child
# spawned straight from this process (vfork and exec) would inherit this
# process's high-water mark, big after the checks above.
RSS_LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(fd, 1)
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def peak_rss_kb(argv):
    res = subprocess.run([sys.executable, "-c", RSS_LAUNCHER, *argv], capture_output=True,
                         text=True, timeout=600)
    code, rss = res.stdout.split()
    if code != "0":
        fail(f"{' '.join(argv)}: exit {code}: {res.stderr}")
    return int(rss)


def trailer(path):
    """The metadata object at the end of a trace file, without reading it all."""
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - 4096))
        tail = f.read().decode()
    return json.loads(tail[tail.index('"metadata":') + len('"metadata":'):].rstrip()[:-1])


def check_memory(bins):
    if bins["preload_prefix"]:
        # AddressSanitizer's quarantine keeps freed memory, so RSS grows with
        # the work done whatever the exporter holds: the bound is the plain
        # build's to check.
        print("memory: not measured under AddressSanitizer (its quarantine keeps freed memory)")
        return
    figures = {}
    for label, (batches, per) in (("small", SMALL), ("large", LARGE)):
        dep = Deployment(bins).start()
        try:
            for rank in range(2):
                subprocess.run([bins["producer"], "--agent", dep.endpoint, "--node", dep.node,
                                "--job", "big", "--rank", str(rank), "--batches", str(batches),
                                "--events-per-batch", str(per), "--realtime", "--rate", "200K"],
                               check=True, capture_output=True)
            n = 2 * batches * per
            dep.wait_for(lambda ev: len(ev) >= n, job="big", timeout=120)
            out = os.path.join(dep.tmp, "big.json")
            chrome = peak_rss_kb([bins["export"], "--store", dep.store, "--job", "big",
                                  "--chrome", out, "--lateness", str(LATENESS_MS),
                                  "--grace", str(LATENESS_MS)])
            slices = trailer(out)["slices"]
            if slices != n:
                fail(f"{label}: {slices} slices for {n} events")
            jsonl = peak_rss_kb([bins["export"], "--store", dep.store, "--job", "big",
                                 "--jsonl", os.devnull])

            figures[label] = (n, chrome, jsonl, os.path.getsize(out))
        finally:
            dep.stop()
    (n1, c1, j1, b1), (n2, c2, j2, b2) = figures["small"], figures["large"]
    print(f"memory: {n1} events: --chrome peak RSS {c1} KiB ({b1} bytes written), --jsonl "
          f"{j1} KiB; {n2} events: --chrome {c2} KiB ({b2} bytes), --jsonl {j2} KiB")
    if c2 - c1 > RSS_BOUND_KB:
        fail(f"--chrome's peak RSS grew by {c2 - c1} KiB from {n1} to {n2} events "
             f"(bound {RSS_BOUND_KB} KiB)")
    if j2 - j1 < (n2 - n1) * 50 // 1024:
        fail("--jsonl's RSS did not grow with the events: the measurement is not measuring")
    print(f"ok: --chrome's peak RSS grew by {c2 - c1} KiB for {n2 - n1} more events "
          f"(bound {RSS_BOUND_KB} KiB); --jsonl's by {j2 - j1} KiB")


def main():
    bins = parse_bins(sys.argv[1:])
    if shutil.which("chromium") is None:
        fail("chromium is not installed (deploy/install-deps.sh installs it)")
    dep = Deployment(bins).start()
    job = f"chrome-{os.getpid()}"
    try:
        traced_job(bins, dep, job)
        path = os.path.join(dep.tmp, "job.json")
        for _ in range(5):  # a clock sample arriving in between moves aligned times
            events = dep.export(job)
            run_export(bins, "--store", dep.store, "--job", job, "--chrome", path)
            stats = json.loads(run_export(bins, "--store", dep.store, "--job", job, "--stats",
                                          "--format", "json").stdout)
            if dep.export(job) == events:
                break
        trace = json.load(open(path))
        check_schema(trace)
        slices = check_events(trace, events)
        check_flows(trace, slices, events, stats)
        check_tracks(trace, dep.node)
        counts = collections.Counter(e["ph"] for e in trace["traceEvents"])
        check_chromium(path, dict(counts), counts["s"], dep.tmp)
        # A new clock sample can move aligned times between two exports.
        alias, again = os.path.join(dep.tmp, "alias.json"), os.path.join(dep.tmp, "again.json")
        stray = os.path.exists("-")
        for _ in range(5):
            run_export(bins, "--store", dep.store, "--job", job, "--perfetto", alias)
            run_export(bins, "--store", dep.store, "--job", job, "--chrome", again)
            piped = run_export(bins, "--store", dep.store, "--job", job, "--chrome", "-")
            if open(alias).read() == open(again).read() == piped.stdout:
                break
        else:
            fail("--perfetto, --chrome FILE and --chrome - (a pipe) wrote different traces")
        if "wrote standard output:" not in piped.stderr or (os.path.exists("-") and not stray):
            fail(f"--chrome - did not write to standard output: {piped.stderr!r}")
        # A window: what overlaps it, as --slog2's --from/--to (against a
        # full export of the same state of the store, see above).
        ends = sorted(ns(e["ts"] + e["dur"]) for e in slices)
        lo, hi = ends[len(ends) // 3] / 1e9, ends[2 * len(ends) // 3] / 1e9
        part = os.path.join(dep.tmp, "window.json")
        for _ in range(5):
            run_export(bins, "--store", dep.store, "--job", job, "--chrome", part,
                       "--from", repr(lo), "--to", repr(hi))
            whole = [e for e in json.load(open(again))["traceEvents"] if e["ph"] == "X"]
            # Lanes may differ: without the slices before the window fewer
            # are needed.  Slices are compared by all but their track.
            bare = lambda e: canon({k: v for k, v in e.items() if k != "tid"})  # noqa: E731
            inside = collections.Counter(bare(e) for e in whole if ns(e["ts"] + e["dur"]) / 1e9
                                         >= lo and ns(e["ts"]) / 1e9 <= hi)
            got = collections.Counter(bare(e) for e in json.load(open(part))["traceEvents"]
                                      if e["ph"] == "X")
            if got == inside and got:
                break
            run_export(bins, "--store", dep.store, "--job", job, "--chrome", again)
        else:
            fail(f"--from {lo} --to {hi}: {sum(got.values())} slices, want {sum(inside.values())}")
        print(f"ok: --perfetto is --chrome, --chrome - writes the same to a pipe; --from {lo:.6f} --to {hi:.6f} keeps the "
              f"{sum(inside.values())} slices overlapping the window")
    finally:
        dep.stop()
    check_memory(bins)
    print("export.chrome: all checks passed")


if __name__ == "__main__":
    main()
