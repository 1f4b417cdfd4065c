#!/usr/bin/env python3
"""The traced program's output is the same with and without the library:
with an agent, with no agent listening, with a stopped (slow) agent, with an
agent killed mid-run, and with IOTRACE_DISABLE=1."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Deployment, mpirun, parse_bins  # noqa: E402


def run(bins, dep, name, env, preload=True):
    path = os.path.join(dep.tmp, name + ".bin")
    t0 = time.time()
    res = mpirun(bins, 4, [bins["app"], path, "65536"], env=env, preload=preload, timeout=120)
    took = time.time() - t0
    if res.returncode != 0:
        raise AssertionError(f"{name}: exit {res.returncode}\n{res.stderr}")
    out = res.stdout.replace(path, "FILE")
    print(f"{name}: {took:.2f} s: {out.strip()}")
    return out


def main():
    bins = parse_bins(sys.argv[1:])
    dep = Deployment(bins).start()
    try:
        base = run(bins, dep, "plain", {}, preload=False)
        cases = {
            "traced": {"IOTRACE_AGENT": dep.endpoint},
            "no-agent": {"IOTRACE_AGENT": "ipc://" + os.path.join(dep.tmp, "nobody.sock")},
            "disabled": {"IOTRACE_AGENT": dep.endpoint, "IOTRACE_DISABLE": "1"},
        }
        for name, env in cases.items():
            assert run(bins, dep, name, env) == base, name
        dep.agent.send_signal(signal.SIGSTOP)  # an agent that takes nothing
        try:
            assert run(bins, dep, "stopped-agent", {"IOTRACE_AGENT": dep.endpoint}) == base
        finally:
            dep.agent.send_signal(signal.SIGCONT)
        dep.agent.kill()
        dep.agent.wait()
        assert run(bins, dep, "killed-agent", {"IOTRACE_AGENT": dep.endpoint}) == base
        print("ok: identical output in every case")
    finally:
        dep.stop()


if __name__ == "__main__":
    main()
