#!/usr/bin/env python3
"""Benchmark of iotrace-export's row formats against --stats
(docs/performance.md, "Exports"): events per CPU second of --jsonl, --csv
and --chrome, each as a ratio of --stats's over the same store in the same
round (rounds interleaved, medians), and the peak memory of each at two
store sizes, which must not grow with the store.

The stores are written untimed by bench_analysis (-d): 16 ranks issuing 64
KiB writes, each with its pwrite and two disk operations on 4 servers,
collective rounds, every node on its own clock.  The outputs go to
/dev/null: what is measured is the export's work, not the disk's.  Each
run's CPU time (user + system) and peak RSS come from wait4() of that run
alone; the load average is printed with each round.

usage: bench-export.py --export PATH --bench-analysis PATH [--events N[,N...]]
                       [--rounds R] [--dir DIR]"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# --stats and --chrome run the streaming merge: the store's synthetic
# timeline is dense (millions of events a second), so they get the
# lateness bench_analysis generates for (50 ms), as bench-slog2-export.py.
FORMATS = [
    ("stats", ["--stats", "--lateness", "50", "--grace", "50"]),
    ("jsonl", ["--jsonl", "/dev/null"]),
    ("csv", ["--csv", "/dev/null"]),
    ("chrome", ["--chrome", "/dev/null", "--lateness", "50", "--grace", "50"]),
]


def run(cmd):
    """(cpu seconds, wall seconds, peak RSS in KiB) of one child."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(cmd)} failed: {err}")
    return ru.ru_utime + ru.ru_stime, wall, ru.ru_maxrss


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--export", required=True)
    ap.add_argument("--bench-analysis", required=True)
    ap.add_argument("--events", default="1500000,6000000",
                    help="store sizes, comma-separated (default 1500000,6000000); the rates "
                         "are those of the largest")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where the stores go (default $TMPDIR or /tmp)")
    a = ap.parse_args()
    sizes = sorted(int(x) for x in a.events.split(","))
    work = tempfile.mkdtemp(prefix="iotrace-bench-export-", dir=a.dir)
    rss = {}
    try:
        for n in sizes:
            store = os.path.join(work, f"store-{n}")
            subprocess.run([a.bench_analysis, "-n", str(n), "-d", store, "-k"], check=True,
                           stdout=subprocess.DEVNULL)
            cpu = {name: [] for name, _ in FORMATS}
            for r in range(a.rounds if n == sizes[-1] else 1):
                line = []
                for name, opts in FORMATS:
                    c, w, m = run([a.export, "--store", store, "--no-progress"] + opts)
                    cpu[name].append(c)
                    rss.setdefault(name, {})[n] = max(rss.get(name, {}).get(n, 0), m)
                    line.append(f"{name} {c:.2f} s")
                print(f"{n} events, round {r + 1}: " + ", ".join(line) +
                      f"; load {os.getloadavg()[0]:.1f}", flush=True)
            shutil.rmtree(store)
        n = sizes[-1]
        base = statistics.median(cpu["stats"])
        print(f"\n{n} events, medians of {a.rounds} rounds (CPU time, user + system):")
        for name, _ in FORMATS:
            med = statistics.median(cpu[name])
            mem = ", ".join(f"{rss[name][k] / 1024:.0f} MiB at {k / 1e6:g} M" for k in sizes)
            print(f"  --{name:7} {med:6.2f} s  {n / med / 1e6:5.2f} M events/s per core  "
                  f"{base / med:5.2f} of --stats  peak RSS {mem}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
