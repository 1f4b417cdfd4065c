#!/usr/bin/env python3
"""No loss is silent when the node agent dies: a traced MPI job runs while
the collector is down; its agent is killed with SIGKILL in the middle of the
run and started again, and killed once more after the job has ended, with
everything the job made still waiting in its spool. Then the collector and
the agent start. For every rank, events stored + events counted in drop
records must equal the events the rank's library says it made, exactly;
nothing may be stored twice."""
import collections
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Deployment, mpirun_cmd, parse_bins  # noqa: E402

NPROCS = 2
RUN_S = 5
JOB = "agent-kill"


def kill_agent(dep):
    dep.agent.send_signal(signal.SIGKILL)
    dep.agent.wait()


def spool_bytes(dep):
    d = os.path.join(dep.tmp, "agent-state", "spool")
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".seg"))


def main():
    bins = parse_bins(sys.argv[1:])
    dep = Deployment(bins)
    try:
        dep.start_agent()  # the collector is down from the start
        cmd = mpirun_cmd(bins, NPROCS, [bins["steady_app"], os.path.join(dep.tmp, "data"), str(RUN_S)],
                         env={"IOTRACE_AGENT": dep.endpoint, "IOTRACE_JOB_ID": JOB,
                              "IOTRACE_VERBOSE": "1"})
        job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        kill_agent(dep)
        time.sleep(1.0)  # the ranks' sends fail meanwhile: counted as send_failed
        dep.start_agent()
        out, err = job.communicate(timeout=120)
        assert job.returncode == 0, err
        time.sleep(1.0)  # the agent takes what the ranks handed over at exit
        held = spool_bytes(dep)
        kill_agent(dep)
        assert held > 0, "the agent's spool was empty with the collector down"

        dep.start_collector()
        dep.start_agent()

        made = {}
        for m in re.finditer(r"iotrace-client\[(\d+)\]: made (\d+) events: .*?(\d+) lost with no "
                             r"batch left", err):
            made[int(m.group(1))] = (int(m.group(2)), int(m.group(3)))
        assert len(made) == NPROCS, err
        assert all(unsent == 0 for _, unsent in made.values()), made

        def accounted(events):
            n = collections.Counter()
            for e in events:
                n[e["pid"]] += e["dropped"] if e["kind"] == "drop" else 1
            return n

        events = dep.wait_for(lambda ev: all(accounted(ev)[pid] >= m for pid, (m, _) in made.items()),
                              job=JOB, timeout=90)
        time.sleep(1.0)  # anything arriving late would be a duplicate
        events = dep.export(JOB)
        got = accounted(events)
        drops = collections.Counter()
        for e in events:
            if e["kind"] == "drop":
                drops[e["reason"]] += e["dropped"]
        calls = collections.Counter((e["pid"], e["callid"]) for e in events if e["kind"] == "mpiio")
        twice = [k for k, n in calls.items() if n > 1]
        assert not twice, f"{len(twice)} MPI-IO events stored twice"
        for pid, (m, _) in made.items():
            assert got[pid] == m, f"pid {pid}: made {m}, stored + dropped {got[pid]} ({dict(drops)})"
        assert drops["send_failed"] > 0, f"no send_failed drops while the agent was down: {dict(drops)}"
        ranks = {e["mpi_rank"] for e in events if e["kind"] == "mpiio"}
        assert ranks == set(range(NPROCS)), ranks
        stored = sum(1 for e in events if e["kind"] != "drop")
        print(f"ok: made {sum(m for m, _ in made.values())} events on {NPROCS} ranks; stored {stored}, "
              f"counted as dropped {dict(drops)}; none twice; spool held {held} bytes at the second kill")
    finally:
        dep.stop()


if __name__ == "__main__":
    main()
