#!/usr/bin/env python3
"""IOR-like MPI-IO bandwidth with and without tracing, and the bytes stored.

    bench-ior.py BUILD_DIR [--np 2] [--rounds K] [--dir DIR] [--busy]
                 [--analysis on|off] [--analysis-nice N] [--analysis-yield SEC]
                 [--sizes 4096,1048576] [--mib-per-rank M]
                 [--variant NAME:[lib=PATH,]VAR=VALUE,...]...

A real collector (live analysis on unless --analysis off, HTTP on loopback)
and a real agent run on this machine for the whole benchmark, beside the
ranks: with --np equal to the cores, every core has a rank and the daemons
take their CPU from the ranks, as on a fully busy compute node.  For each
transfer size and each mode (independent MPI_File_write_at/read_at,
collective ..._at_all), each round runs tests/bench_ior under `mpiexec -n
NP` once untraced and once with libiotrace-client preloaded, alternating
which goes first; bench_ior writes then reads back (and checks) M MiB per
rank in a shared file in DIR (default 256 MiB below 1 MiB transfers, 1024
MiB from 1 MiB up, so that a phase lasts long enough to time: 256 MiB at
1 MiB transfers take about 40 ms here), three repetitions, IOR's segmented
layout, and times each phase from a barrier before the open to one after
the close.

Per size, mode and direction it prints the median over rounds of the
bandwidth ratio traced / untraced (each round's pair: the medians of its
repetitions), the events stored, the bytes the store grew by per stored
event, and the events dropped anywhere (the jobs' drop records, as the
collector counts them).  Targets (docs/performance.md): 4 KiB ratio >= 0.92,
1 MiB >= 0.99, <= 6 stored bytes per event, no drop.

--variant adds a traced run to every round, with the given environment
variables (IOTRACE_POSIX=outside, IOTRACE_DISABLE=1, ...) and, with
lib=PATH, another build of libiotrace-client.so: each is compared with the
same round's untraced run and printed on its own line, so that settings
and builds are measured in the same hours.  The plain traced run, named
"traced", is always there.  A variant that stores nothing
(IOTRACE_DISABLE=1, or a build that records and sends nothing) shows 0
events stored.
"""
import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("bench_cost", os.path.join(HERE, "bench-cost.py"))
bench_cost = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_cost)


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
        return json.loads(r.read())


def job_account(build, stack, job):
    """The job's stored events and the events its drop records count: as the
    live analysis has them, or (analysis off) as iotrace-export reads them
    from the store."""
    if stack.analysis:
        jobs = {j["job"]: j for j in get(stack.hport, "/api/v1/jobs")["jobs"]}
        return jobs[job]["events"], jobs[job]["dropped_events"]
    r = subprocess.run([f"{build}/collector/iotrace-export", "--store",
                        os.path.join(stack.work, "store"), "--job", job, "--list-jobs"],
                       capture_output=True, text=True, timeout=600)
    fields = dict(f.split("=", 1) for f in r.stdout.split()[1:] if "=" in f)
    return int(fields["events"]), int(fields["dropped"])


def drop_reasons(build, stack, job):
    """{reason: events} of the job's drop records, read from the store."""
    r = subprocess.run([f"{build}/collector/iotrace-export", "--store",
                        os.path.join(stack.work, "store"), "--job", job, "--jsonl", "-"],
                       capture_output=True, text=True, timeout=600)
    out = {}
    for line in r.stdout.splitlines():
        if '"kind":"drop"' in line:
            e = json.loads(line)
            out[e["reason"]] = out.get(e["reason"], 0) + e["dropped"]
    return out


def mib_per_rank(args, xfer):
    if args.mib_per_rank:
        return args.mib_per_rank
    return 1024 if xfer >= 1 << 20 else 256


def parse_variant(text):
    """NAME:[lib=PATH,]VAR=VALUE,... -> (name, library or None, {VAR: VALUE})."""
    name, _, spec = text.partition(":")
    if not name or name in ("traced", "untraced"):
        raise argparse.ArgumentTypeError(f"--variant {text!r}: a name of its own before ':'")
    lib, env = None, {}
    for item in filter(None, spec.split(",")):
        key, eq, value = item.partition("=")
        if not eq:
            raise argparse.ArgumentTypeError(f"--variant {text!r}: {item!r} is not VAR=VALUE")
        if key == "lib":
            lib = os.path.abspath(value)
        else:
            env[key] = value
    return name, lib, env


def run_ior(build, args, path, xfer, mode, variant, sock, job):
    """variant: None (untraced) or (name, library or None, environment)."""
    mib = mib_per_rank(args, xfer)
    block = min(mib << 20, 32 << 20)
    segments = max(1, (mib << 20) // block)
    env = dict(os.environ)
    if variant:
        _name, lib, extra = variant
        env.update(LD_PRELOAD=lib or f"{build}/clientlib/libiotrace-client.so",
                   IOTRACE_AGENT="ipc://" + sock, IOTRACE_JOB_ID=job)
        env.update(extra)
    r = subprocess.run(["mpiexec", "-n", str(args.np), f"{build}/tests/bench_ior", path,
                        str(xfer), str(block), str(segments), mode, "3"],
                       env=env, capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise RuntimeError(f"bench_ior failed ({r.returncode}): {r.stderr}")
    out = {"write": [], "read": []}
    for line in r.stdout.splitlines():
        kind, mibs, _secs, _calls = line.split()
        out[kind].append(float(mibs))
    return {k: statistics.median(v) for k, v in out.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    ap.add_argument("--np", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default=None, help="where the shared file goes (default: a "
                    "directory under /tmp)")
    ap.add_argument("--busy", action="store_true", help="keep one core busy with another process")
    ap.add_argument("--analysis", choices=("on", "off"), default="on")
    ap.add_argument("--analysis-nice", type=int, default=None, metavar="N",
                    help="the collector's --analysis-nice (default: the collector's own, 10)")
    ap.add_argument("--analysis-yield", type=int, default=None, metavar="SEC",
                    help="the collector's --analysis-yield (default: the collector's own, 60)")
    ap.add_argument("--sizes", default="4096,1048576")
    ap.add_argument("--mib-per-rank", type=int, default=None,
                    help="MiB each rank writes and reads per phase (default: 256 below 1 MiB "
                         "transfers, 1024 from 1 MiB up)")
    ap.add_argument("--variant", type=parse_variant, action="append", default=[],
                    metavar="NAME:[lib=PATH,]VAR=VALUE,...",
                    help="another traced run in every round: these environment variables, "
                         "and with lib= another libiotrace-client.so (repeatable)")
    args = ap.parse_args()
    variants = [("traced", None, {})] + args.variant
    if len({v[0] for v in variants}) != len(variants):
        ap.error("--variant: two variants of one name")
    build = os.path.abspath(args.build)
    work = tempfile.mkdtemp(prefix="iotrace-bench-ior-", dir="/dev/shm")
    data = tempfile.mkdtemp(prefix="iotrace-bench-ior-", dir=args.dir or "/tmp")
    extra = [] if args.analysis == "on" else ["--analysis", "off", "--http", "off"]
    if args.analysis_nice is not None:
        extra += ["--analysis-nice", str(args.analysis_nice)]
    if args.analysis_yield is not None:
        extra += ["--analysis-yield", str(args.analysis_yield)]
    stack = bench_cost.Stack(build, work, extra=extra)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.busy else None
    per_rank = (f"{args.mib_per_rank}" if args.mib_per_rank else "256 (1024 from 1 MiB transfers)")
    print(f"np={args.np}, {per_rank} MiB per rank per phase, live analysis "
          f"{args.analysis}"
          + (f" at niceness {args.analysis_nice}" if args.analysis_nice is not None else "")
          + (f", --analysis-yield {args.analysis_yield}" if args.analysis_yield is not None else "")
          + f", load {os.getloadavg()[0]:.2f}" + (", one core kept busy" if busy else ""),
          flush=True)
    failed = False
    try:
        stack.settled()
        for xfer in (int(x) for x in args.sizes.split(",")):
            for mode in ("indep", "coll"):
                acc = {v[0]: {"write": [], "read": [], "events": 0, "stored": 0, "dropped": 0,
                              "reasons": {}} for v in variants}
                for r in range(args.rounds):
                    res = {}
                    order = [None] + variants
                    for variant in (order if r % 2 == 0 else order[::-1]):
                        name = variant[0] if variant else "untraced"
                        job = f"ior-{xfer}-{mode}-{r}" + ("" if name == "traced" else f"-{name}")
                        st0 = stack.settled()
                        res[name] = run_ior(build, args, os.path.join(data, "f"), xfer, mode,
                                            variant, stack.sock, job)
                        if variant:
                            st1 = stack.settled()
                            a = acc[name]
                            try:
                                n, d = job_account(build, stack, job)
                            except (KeyError, RuntimeError):
                                if name == "traced":  # the default stores its job: a fault
                                    raise
                                n, d = 0, 0  # a variant that stored nothing, not even the job
                            a["events"] += n
                            a["dropped"] += d
                            for k, v in (drop_reasons(build, stack, job) if d else {}).items():
                                a["reasons"][k] = a["reasons"].get(k, 0) + v
                            a["stored"] += st1["bytes_stored"] - st0["bytes_stored"]
                    base = res["untraced"]
                    for name in acc:
                        for k in ("write", "read"):
                            acc[name][k].append(res[name][k] / base[k])
                    shown = ", ".join(f"{n} {res[n]['write']:.0f} / {res[n]['read']:.0f}"
                                      for n in acc if n != "traced")
                    print(f"  {xfer} B {mode} round {r + 1}: write {base['write']:.0f} -> "
                          f"{res['traced']['write']:.0f} MiB/s, read {base['read']:.0f} -> "
                          f"{res['traced']['read']:.0f} MiB/s"
                          + (f" ({shown})" if shown else ""), flush=True)
                for name, a in acc.items():
                    label = "" if name == "traced" else f" [{name}]"
                    print(f"{xfer} B {mode}{label}: bandwidth ratio traced/untraced, median of "
                          f"{args.rounds} rounds: write {statistics.median(a['write']):.3f} "
                          f"({min(a['write']):.3f}-{max(a['write']):.3f}), read "
                          f"{statistics.median(a['read']):.3f} ({min(a['read']):.3f}-"
                          f"{max(a['read']):.3f}); {a['events']} events stored, "
                          + (f"{a['stored'] / a['events']:.2f} bytes stored per event, "
                             if a["events"] else f"{a['stored']} bytes stored, ")
                          + f"{a['dropped']} dropped"
                          + (f" {a['reasons']}" if a["reasons"] else ""),
                          flush=True)
                    failed |= a["dropped"] > 0
    finally:
        if busy:
            busy.kill()
        stack.stop()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(data, ignore_errors=True)
    print(f"load at the end {os.getloadavg()[0]:.2f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
