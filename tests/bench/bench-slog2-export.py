#!/usr/bin/env python3
"""Benchmark of `iotrace-export --slog2` (docs/performance.md, "SLOG-2
export"): drawables/s and peak memory of the real program over a store of
synthetic events, with `--stats` over the same store as the baseline of the
same run (reading, decoding, aligning, merging and matching without the
SLOG-2 states, lanes and writer).

The store is written untimed by bench_analysis (-d): 16 ranks issuing 64
KiB writes, each with its pwrite and two disk operations on 4 servers,
collective rounds whose disk operations only the aggregators issue, every
node on its own clock.  Each run's CPU time and peak RSS come from wait4()
of that run alone.

usage: bench-slog2-export.py --export PATH --bench-analysis PATH [-n EVENTS]
                             [--runs N] [--dir DIR] [--lateness MS] [--grace MS]
                             [-- EXTRA --slog2 OPTIONS]"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SUMMARY = re.compile(r"wrote \S+: (\d+) states, (\d+) arrows, (\d+) events on (\d+) timelines; "
                     r"(\d+) tree nodes, depth (\d+), (\d+) bytes")


def run(cmd):
    """(stderr, cpu seconds, wall seconds, peak RSS in KiB) of one child."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {p.returncode}: {err}")
    return err, ru.ru_utime + ru.ru_stime, wall, ru.ru_maxrss


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--export", required=True)
    ap.add_argument("--bench-analysis", required=True)
    ap.add_argument("-n", type=int, default=10_000_000, help="events in the store")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where the store and the file go (default /tmp)")
    ap.add_argument("--lateness", type=int, default=50,
                    help="--lateness MS of both exports (default 50, as bench_analysis)")
    ap.add_argument("--grace", type=int, default=50, help="--grace MS of both exports (default 50)")
    ap.add_argument("extra", nargs="*", help="more --slog2 options, after --")
    a = ap.parse_args()

    work = tempfile.mkdtemp(prefix="iotrace-bench-slog2-", dir=a.dir)
    store, out = os.path.join(work, "store"), os.path.join(work, "bench.slog2")
    try:
        subprocess.run([a.bench_analysis, "-n", str(a.n), "-d", store, "-k"], check=True,
                       stdout=subprocess.DEVNULL)
        rows = []
        for i in range(a.runs):
            windows = ["--lateness", str(a.lateness), "--grace", str(a.grace)]
            _, base_cpu, _, base_rss = run([a.export, "--store", store, "--stats",
                                            "--format", "json", *windows])
            err, cpu, wall, rss = run([a.export, "--store", store, "--slog2", out, *windows,
                                       *a.extra])
            m = SUMMARY.search(err)
            if not m:
                sys.exit(f"no summary line in: {err}")
            states, arrows, events, lines, nodes, depth, size = map(int, m.groups())
            drawables = states + arrows + events
            rows.append((drawables / cpu, cpu, wall, rss, base_cpu, base_rss))
            print(f"run {i + 1}: {drawables} drawables ({states} states, {arrows} arrows) on "
                  f"{lines} timelines, {nodes} nodes, depth {depth}, {size / 1e6:.0f} MB: "
                  f"{cpu:.2f} s CPU ({wall:.2f} s wall) = {drawables / cpu / 1e6:.2f} M "
                  f"drawables/s, peak RSS {rss / 1024:.1f} MiB; --stats baseline "
                  f"{base_cpu:.2f} s CPU, peak RSS {base_rss / 1024:.1f} MiB "
                  f"(--slog2 takes {cpu / base_cpu:.2f}x)", flush=True)
            os.unlink(out)
        med = lambda k: statistics.median(r[k] for r in rows)  # noqa: E731
        print(f"median of {a.runs}: {med(0) / 1e6:.2f} M drawables/s per core "
              f"({a.n / med(1) / 1e6:.2f} M events/s), peak RSS {med(3) / 1024:.1f} MiB; "
              f"--stats over the same store {med(4):.2f} s CPU, "
              f"--slog2/--stats CPU {statistics.median(r[1] / r[4] for r in rows):.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
