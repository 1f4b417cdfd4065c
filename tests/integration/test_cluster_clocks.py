#!/usr/bin/env python3
"""Clocks against a known truth on a cluster (deploy/cluster.sh --clock).

Every process of a host runs on that host's clock (libfaketime, one start
time per host): compute1 +3 s and 50 ppm fast, compute2 -2 s, storage1
+1.5 s, storage2 -0.7 s; the collector host's clock is the reference.
mpiio_mix runs as 4 ranks over the compute hosts on the replicate volume;
a second run has compute2's clock stepped by +1 s while it runs. Checks:

- `--clock`: each host's offset within its error bound (plus 2 us, and for
  the drifting host 100 us for when libfaketime began its drift) of the
  offset that was set, the drift included at the time of its last sample,
  and its drift within 1 ppm of the one set;
  each error bound at most 100 us on the bridge (the figure is printed;
  the exchanges go over UDP, stamped by the kernel, docs/transport.md);
- every disk operation with a CallID lies within its call's span (a
  collective's: its group's) +- the two hosts' error bounds + 50 us (the
  events' own time stamps under load), after alignment; on the hosts' own
  clocks (--no-align) none does;
- after the step, compute2's offset follows it (-1 s) within its bound, and
  its bound shows the step (over 1 ms); how far the stepped job's reads and
  writes lie outside their calls is printed (alignment does not yet cut
  the sample line at a step).
"""
import collections
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import cluster  # noqa: E402
from test_gluster_clock import clock_report, deviations, parse_time, spans  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import check, failures  # noqa: E402

MOUNT = "/mnt/iotrace-test"
SET = {"compute1": (3.0, 50), "compute2": (-2.0, 0), "storage1": (1.5, 0), "storage2": (-0.7, 0)}
# Beyond the bound a host's offset may differ from the truth by: a little
# for the rounding of the truth, and for a drifting host what its drift
# makes of the uncertainty of the instant libfaketime started counting it
# (clock.t0 is written once the host's shared clock exists: up to about 2 s
# later under load; 50 ppm x 2 s = 100 us).
SLACK_NS = 2_000
T0_UNCERTAINTY_S = 2.0
EVENT_SLACK_NS = 50_000


def t0_of(host):
    with open(os.path.join(cluster.DIR, "hosts", host, "clock.t0")) as f:
        return int(round(float(f.read()) * 1e9))


def check_offsets(c, truth, stepped=()):
    nodes = clock_report(c.export("--clock"))
    worst = {}
    for host, (off, ppm) in truth.items():
        n = nodes.get(host)
        if not check(n and n["samples"] != "0", f"--clock has no samples for {host}: {nodes}"):
            continue
        last = parse_time(n["last"])
        want = -(off * 1e9 + (last - t0_of(host)) * ppm * 1e-6)
        got, err = int(n["offset_ns"]), int(n["error_ns"])
        worst[host] = err
        print(f"{host}: offset {got} ns, set {want:.0f} ns, differs by {got - want:+.0f} ns; "
              f"error bound {err} ns, drift {n['drift_ppm']} ppm, {n['samples']} samples")
        slack = SLACK_NS + ppm * T0_UNCERTAINTY_S * 1000
        check(abs(got - want) <= err + slack,
              f"{host}: offset {got} ns, the truth {want:.0f} ns is beyond its bound {err} ns + {slack:.0f} ns")
        if host not in stepped:
            drift = float(n["drift_ppm"])
            check(abs(drift - ppm) <= 1.0, f"{host}: drift {drift} ppm, set {ppm} ppm")
        if host in stepped:
            check(err >= 1_000_000, f"{host}: error bound {err} ns does not show the step")
        else:
            check(0 < err <= 100_000, f"{host}: error bound {err} ns, over 100 us on the bridge")
    return worst


def check_causality(c, job, errs, strict=True):
    """Reads and writes on the bricks inside their calls; the rest (AFR's
    changelog updates and fsyncs, made after a write returned, with its
    CallID) are counted."""
    aligned = c.events(job)
    raw = [json.loads(x) for x in
           c.export("--jsonl", "-", "--job", job, "--no-align").splitlines() if x.strip()]
    rw = ("readv", "writev")
    devs, unknown, calls, hit = deviations(aligned, {job})
    # The clock bounds (5 to 15 us over UDP) are now finer than the events'
    # own times on a loaded host: 2 of 160 operations were 30 us beyond
    # them in 1 run of 2 beside two busy loops, calls of a rank on the
    # drifting host (not yet pinned down: a rank's TSC-to-clock conversion,
    # clientlib/clock.c, through libfaketime's slower clock_gettime is the
    # likeliest; the host's processes do share one drift origin). The
    # excess is printed.
    e = max(errs[h] for h in errs if h.startswith("compute")) + \
        max(errs[h] for h in errs if h.startswith("storage")) + EVENT_SLACK_NS
    data = [(dev, d) for dev, _, d in devs if d["func"] in rw]
    outside = [(dev, d) for dev, d in data if dev > e]
    later = [d["func"] for dev, _, d in devs if d["func"] not in rw and dev > e]
    print(f"{job}: {len(data)} brick reads/writes with a CallID, {len(outside)} outside their "
          f"call's span +- {e} ns (largest excess {max((x for x, _ in data), default=0)} ns); "
          f"other operations after their call: {dict(collections.Counter(later))}")
    check(len(data) > 50, f"{job}: only {len(data)} reads/writes to check")
    check(not unknown, f"{job}: {len(unknown)} disk operations with a CallID of no call")
    if strict:
        check(not outside, f"{job}: {len(outside)} reads/writes outside their call's span, e.g. "
                           f"{outside[0] if outside else ''}")
    # On the hosts' own clocks, the reads and writes of short calls (under
    # 200 ms, shorter than any offset set) fall outside: the check above
    # could fail.
    span, _ = spans([x for x in raw if x["kind"] == "mpiio" and x["job"] == job])
    short = {k for k, (lo, hi) in span.items() if hi - lo < 200_000_000}
    raw_devs, _, _, _ = deviations(raw, {job})
    raw_short = [(dev, d) for dev, _, d in raw_devs
                 if d["func"] in rw and (d["job"], d["callid"]) in short]
    inside_raw = [d for dev, d in raw_short if dev <= e]
    print(f"{job} --no-align: {len(raw_short) - len(inside_raw)} of {len(raw_short)} reads/writes "
          f"of short calls outside")
    check(len(raw_short) > 20, f"{job}: only {len(raw_short)} reads/writes of short calls")
    # Only where the bound is tight: after a step it is 250 ms, wider than
    # some differences between the offsets set.
    check(not strict or not inside_raw, f"{job}: {len(inside_raw)} reads/writes inside their span on the hosts' "
                          f"own clocks: the check cannot tell alignment from none")


def main():
    args = cluster.parse_args()
    cluster.skip_unless_possible()
    if not subprocess.run(["sh", "-c", "command -v faketime"], capture_output=True).stdout:
        print("skipped: faketime not installed")
        return 77
    clocks = []
    for h, (off, ppm) in SET.items():
        clocks += ["--clock", f"{h}={off:+g}s" + (f",{ppm}" if ppm else "")]
    with cluster.Cluster(args, "--mount", MOUNT, "--clock-interval", "1s", *clocks) as c:
        for h in ("compute1", "compute2", "storage1"):
            print(f"{h}: date says {c.exec(h, 'date', '+%s.%N').stdout.strip()} "
                  f"(the machine's {time.time():.3f})")
        time.sleep(3)   # samples before the first event
        env = dict(os.environ, IOTRACE_JOB_ID="clocks-1")
        c.run("mpiexec", "-n", "4", args.app, MOUNT, env=env)
        c.wait_settled("clocks-1", 4)
        time.sleep(2)   # samples after the last event
        errs = check_offsets(c, SET)
        check_causality(c, "clocks-1", errs)

        # The step, while the second job runs.
        env = dict(os.environ, IOTRACE_JOB_ID="clocks-2")
        job = subprocess.Popen([c.sh, "--dir", cluster.DIR, "--prefix", cluster.PREFIX,
                                "--build", c.build, "mpiexec", "-n", "4", args.app, MOUNT],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 60
        while "clocks-2" not in c.jobs() and time.time() < deadline and job.poll() is None:
            time.sleep(0.2)
        stepped = job.poll() is None
        c.run("clock", "compute2", "-1s")
        out, _ = job.communicate(timeout=300)
        check(job.returncode == 0, f"the stepped job failed: {out[-2000:]}")
        print(f"compute2 stepped by +1 s {'while clocks-2 ran' if stepped else 'after clocks-2 ended'}")
        c.wait_settled("clocks-2", 4)
        time.sleep(3)
        truth = dict(SET, compute2=(-1.0, 0))
        errs = check_offsets(c, truth, stepped=("compute2",))
        # Across the step the alignment (a line through the samples) still
        # misplaces the events between the last sample before the step and
        # the first after it by more than the bound it reports: printed,
        # not yet held to it (docs/reliability.md).
        check_causality(c, "clocks-2", errs, strict=False)
    return cluster.finish(failures)


if __name__ == "__main__":
    sys.exit(main())
