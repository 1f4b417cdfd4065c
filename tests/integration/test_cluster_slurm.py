#!/usr/bin/env python3
"""Slurm on the cluster (deploy/cluster.sh up starts it; docs/cluster.md),
and the collector host's dashboard of that cluster.

slurmctld on the collector host, slurmd on 2 compute hosts (compute2's clock
2 s ahead), a replicate volume on 2 storage hosts; iotrace's TaskProlog
traces every task, as a site's slurm.conf would. As user nobody:

- `srun -N2 -n4 --ntasks-per-node=2 -J slurm-mix mpiio_mix` from compute1:
  stored as job JOBID.0 (Slurm's name for the step) with name slurm-mix and
  uid 65534 (user nobody in --list-jobs); every call once per rank with its
  host and pid, every brick read/write with a CallID of its call, nothing
  unmatched;
- `sbatch` of a script (#SBATCH -N2 --ntasks-per-node=2 -J batch-mix) whose
  srun runs mpiio_mix: its step JOBID.0 attributed the same way, the script
  itself as job JOBID, both named batch-mix, nobody's;
- a script with `#SBATCH --export=ALL,IOTRACE_DISABLE=1`: it runs (its file
  is written), and nothing of it is stored;
- the dashboard, in headless Chromium on the collector host: every compute
  and storage host as a connected node with its clock offset and bound
  (compute2 near -2 s: collector minus node), the Slurm jobs with their name and user, and each
  job's servers, the brick of each storage host.
"""
import json
import os
import re
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
import cluster  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import check, failures  # noqa: E402

MOUNT = "/mnt/iotrace-test"
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
STORAGE = ["storage1", "storage2"]
HERE = os.path.dirname(os.path.abspath(__file__))


def batch_script(path, truth, app, data, *sbatch):
    with open(path, "w") as f:
        f.write("#!/bin/sh\n")
        for line in sbatch:
            f.write(f"#SBATCH {line}\n")
        f.write(f"#SBATCH -o {os.path.dirname(path)}/%x-%j.out\n")
        f.write(f"srun sh -c '{cluster.RANK_WRAPPER}' {truth} {app} {data}\n")
    os.chmod(path, 0o755)


def sbatch(c, script):
    """Submits as nobody from the collector host; the job id once it is
    over (polled: sbatch --wait polls every few seconds, up to 30)."""
    r = c.exec("collector", *NOBODY, "sbatch", "--parsable", script)
    job = r.stdout.strip().split(";")[0]
    deadline = time.time() + 240
    state = ""
    while time.time() < deadline:
        out = c.exec("collector", "scontrol", "-o", "show", "job", job, check=False).stdout
        m = re.search(r"JobState=(\S+)", out)
        state = m.group(1) if m else "gone"
        if state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
            break
        time.sleep(0.5)
    check(state == "COMPLETED", f"batch job {job} ended {state}")
    return job


def truth_dir():
    d = tempfile.mkdtemp(prefix="iotrace-ranks-")
    os.chmod(d, 0o777)
    return d


def check_row(jobs, job, name):
    row = jobs.get(job)
    check(row is not None, f"--list-jobs has no job {job}: {sorted(jobs)}")
    if row:
        print(f"--list-jobs: {job} {row}")
        check(row.get("name") == name, f"job {job} named {row.get('name')}, want {name}")
        check(row.get("uid") == "65534" and row.get("user") == "nobody",
              f"job {job}'s user: uid={row.get('uid')} user={row.get('user')}, want 65534 nobody")


def check_dashboard(c, jobs_named):
    env = dict(os.environ)
    r = c.exec("collector", "/usr/bin/python3", os.path.join(HERE, "cluster_dashboard.py"),
               "http://127.0.0.1:8080/", *jobs_named, timeout=180, env=env, check=False)
    if not check(r.returncode == 0, f"the dashboard probe failed: {r.stderr[-2000:]}"):
        return
    shown = json.loads(r.stdout.strip().splitlines()[-1])
    agents, jobs, servers = shown["agents"], shown["jobs"], shown["servers"]
    print("dashboard, agents: " + "; ".join(
        f"{n} {a.get('health')} clock {a.get('clock offset ± error')} drift {a.get('drift')}"
        for n, a in sorted(agents.items())))
    want = {"compute1", "compute2", *STORAGE}
    check(set(agents) == want, f"the dashboard's nodes: {sorted(agents)}, want {sorted(want)}")
    for n, a in agents.items():
        check(a.get("health") == "connected", f"{n} shown {a.get('health')}")
        clock = a.get("clock offset ± error", "")
        check("±" in clock, f"{n}'s clock shown as {clock!r}, no offset and bound")
    off = agents.get("compute2", {}).get("clock offset ± error", "")
    m = re.match(r"(-?[0-9.]+) s ±", off)
    # The offset is the collector's clock minus the node's (docs/http-api.md).
    check(m and abs(float(m.group(1)) + 2.0) < 0.01, f"compute2's offset shown {off!r}, its clock set +2 s")
    for job, name in jobs_named.items():
        row = jobs.get(job, {})
        print(f"dashboard, job {job}: {row}")
        check(row.get("name") == name and row.get("user") == "nobody",
              f"the dashboard shows job {job} as name {row.get('name')!r} user {row.get('user')!r}")
        hosts = {s.split(":")[0] for s, ops in servers.get(job, {}).items() if ops and int(ops) > 0}
        print(f"dashboard, job {job}'s servers: {servers.get(job)}")
        check(hosts == set(STORAGE), f"job {job}'s servers on the dashboard: {servers.get(job)}")


def main():
    args = cluster.parse_args()
    cluster.skip_unless_possible()
    tmp = tempfile.mkdtemp(prefix="iotrace-slurm-")
    os.chmod(tmp, 0o1777)
    truths = {k: truth_dir() for k in ("srun", "batch", "optout")}
    try:
        with cluster.Cluster(args, "--mount", MOUNT, "--clock", "compute2=+2s") as c:
            data = MOUNT + "/nobody"
            c.exec("compute1", "sh", "-c", f"mkdir -p {data} && chown 65534:65534 {data}")

            t = time.time()
            r = c.exec("compute1", *NOBODY, "srun", "-N2", "-n4",
                       "--ntasks-per-node=2", "-J", "slurm-mix", "sh", "-c", cluster.RANK_WRAPPER,
                       truths["srun"], args.app, data, timeout=300)
            print(f"srun: {r.stdout.strip()} ({time.time() - t:.1f} s)")
            steps = cluster.slurm_steps(truths["srun"])
            check(len(steps) == 1, f"the ranks' Slurm job and step: {steps}")
            srun_job = ".".join(next(iter(steps)))

            optout = os.path.join(tmp, "optout.sh")
            batch_script(optout, truths["optout"], args.app, data, "-N2", "--ntasks-per-node=2",
                         "-J optout", "--export=ALL,IOTRACE_DISABLE=1")
            optout_job = sbatch(c, optout)

            batch = os.path.join(tmp, "batch.sh")
            batch_script(batch, truths["batch"], args.app, data, "-N2", "--ntasks-per-node=2",
                         "-J batch-mix")
            batch_job = sbatch(c, batch)
            for name in os.listdir(tmp):
                if name.endswith(".out"):
                    print(f"{name}: {open(os.path.join(tmp, name)).read().strip()}")
            steps = cluster.slurm_steps(truths["batch"])
            check(steps == {(batch_job, "0")}, f"the batch job's ranks ran in {steps}")

            cluster.check_attribution(c, srun_job, truths["srun"], STORAGE)
            cluster.check_attribution(c, f"{batch_job}.0", truths["batch"], STORAGE)
            jobs = c.jobs()
            check_row(jobs, srun_job, "slurm-mix")
            check_row(jobs, f"{batch_job}.0", "batch-mix")
            check_row(jobs, batch_job, "batch-mix")
            ran = len(cluster.placed_ranks(truths["optout"]))
            check(ran == 4, f"the opted-out job's ranks that ran: {ran}")
            stored = [j for j in jobs if j == optout_job or j.startswith(optout_job + ".")
                      or jobs[j].get("name") == "optout"]
            print(f"opted-out job {optout_job}: {ran} ranks ran, stored as jobs {stored}")
            check(not stored, f"the opted-out job {optout_job} was stored: {stored}")

            check_dashboard(c, {srun_job: "slurm-mix", f"{batch_job}.0": "batch-mix"})
    finally:
        for d in (tmp, *truths.values()):
            shutil.rmtree(d, ignore_errors=True)
    return cluster.finish(failures)


if __name__ == "__main__":
    sys.exit(main())
