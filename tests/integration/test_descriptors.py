#!/usr/bin/env python3
"""Whatever a program does with descriptors it thinks are its own, and
whether the agent is there or not, the preloaded library neither kills,
hangs nor slows it, and keeps tracing:

- fd_abuse MODE (tests/posix/fd_abuse.c) closes every number, dup2()s or
  dup3()s /dev/null onto every open one (the library's socket included),
  calls closefrom(3) or close_range(3, ~0U, 0), or forks a daemon that
  closes everything; bash does `exec 3>f`, `exec 7>f` and `exec N>f` onto
  the library's own socket.  Each exits as it does untraced, with the same
  output and files, and the writes it makes afterwards reach the store.
- With no agent listening, a traced process does not wait for one; with a
  stopped agent it waits no longer than IOTRACE_LINGER_MS, and what it could
  not hand over reaches the store through the drop box once the agent goes
  on, or is counted."""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Deployment, accounted, parse_bins, sanitizer_env  # noqa: E402

MODES = ["close-all", "dup2-all", "dup3-all", "closefrom", "close-range", "fork-daemon"]

# bash: the shell's own redirections, and one onto the library's socket,
# which the script finds as the shell's only socket in /proc/$$/fd.
BASH = {
    "exec-3": "echo hi > before; exec 3>g; echo x >&3; echo done > after",
    "exec-7": "echo hi > before; exec 7>g; echo x >&7; exec 7>&-; echo done > after",
    "exec-onto-socket": (
        "echo hi > before; n=; for i in $(seq 200); do for f in /proc/$$/fd/*; do "
        "case $(readlink $f) in socket:*) n=${f##*/};; esac; done; "
        "[ -n \"$n\" ] && break; [ -z \"$LD_PRELOAD\" ] && break; sleep 0.05; done; "
        "[ -n \"$n\" ] || n=9; eval \"exec $n>g\"; echo x >&$n; echo done > after; cat g"),
}


def run(bins, env, argv, cwd, preload=True, timeout=60):
    full = dict(os.environ, **sanitizer_env(bins), **env)
    if preload:
        full["LD_PRELOAD"] = bins["preload_prefix"] + bins["client"]
    t0 = time.time()
    res = subprocess.run(argv, cwd=cwd, env=full, capture_output=True, text=True, timeout=timeout)
    return res, time.time() - t0


def files(d):
    return {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))}


def writes_after(events, pid_files):
    """Per case, the write events of the file `after` (and the daemon's)."""
    got = {}
    for e in events:
        if e["kind"] == "posix" and e["func"] in ("write", "open") and e["file"]:
            got.setdefault(e["job"], set()).add(os.path.basename(e["file"]))
    return all(want <= got.get(job, set()) for job, want in pid_files.items())


def abuse_cases(bins, dep):
    wanted = {}
    cases = [(m, [bins["fd_abuse"], m, "."]) for m in MODES]
    cases += [(name, ["bash", "-c", script]) for name, script in BASH.items()]
    for name, argv in cases:
        outs = []
        for traced in (False, True):
            d = os.path.join(dep.tmp, f"{name}-{'traced' if traced else 'plain'}")
            os.mkdir(d)
            # The agent may be slow to read on a loaded machine: what is
            # checked is that the events arrive, so the exit (and bash's
            # exec) waits as long as it takes, not the default second.
            env = {"IOTRACE_AGENT": dep.endpoint, "IOTRACE_JOB_ID": "fd-" + name,
                   "IOTRACE_LINGER_MS": "30000"}
            res, took = run(bins, env, argv, d, preload=traced)
            if res.returncode != 0:
                raise AssertionError(f"{name} ({'traced' if traced else 'plain'}): exit "
                                     f"{res.returncode} after {took:.1f} s\n{res.stderr}")
            outs.append((res.stdout, files(d)))
            print(f"{name}: {'traced' if traced else 'plain'}: exit 0 in {took:.2f} s")
        assert outs[0] == outs[1], f"{name}: traced output differs:\n{outs[0]}\n{outs[1]}"
        wanted["fd-" + name] = {"before", "after"} | ({"daemon"} if name == "fork-daemon" else set())
    try:
        dep.wait_for(lambda ev: writes_after(ev, wanted), timeout=60)
    except AssertionError:
        got = {}
        for e in dep.export():
            if e["kind"] == "posix" and e["file"]:
                got.setdefault(e["job"], set()).add(os.path.basename(e["file"]))
        missing = {j: sorted(w - got.get(j, set())) for j, w in wanted.items() if w - got.get(j, set())}
        raise AssertionError(f"writes missing from the store: {missing}\n{dep.logs()}")
    print(f"ok: {len(cases)} cases exit as untraced, and what they wrote after reached the store")


def no_agent(bins, dep):
    """20 short processes against an absent agent, then a stopped one:
    the bound is far above what they take untraced, and far below the half
    second each used to wait."""
    n = 20
    plain = sum(run(bins, {}, ["cat", "/etc/hostname"], dep.tmp, preload=False)[1]
                for _ in range(n))
    absent = {"IOTRACE_AGENT": "ipc://" + os.path.join(dep.tmp, "nobody.sock"),
              "IOTRACE_LINGER_MS": "60000", "IOTRACE_JOB_ID": "absent"}
    took = sum(run(bins, absent, ["cat", "/etc/hostname"], dep.tmp)[1] for _ in range(n))
    print(f"no agent: {n} traced cat runs {took:.2f} s, untraced {plain:.2f} s")
    assert took < 5.0, f"{n} traced runs with no agent took {took:.2f} s"

    stopped = {"IOTRACE_AGENT": dep.endpoint, "IOTRACE_JOB_ID": "stopped", "IOTRACE_LINGER_MS": "0"}
    dep.agent.send_signal(signal.SIGSTOP)
    try:
        took = sum(run(bins, stopped, ["cat", "/etc/hostname"], dep.tmp)[1] for _ in range(n))
        linger = dict(stopped, IOTRACE_LINGER_MS="300", IOTRACE_JOB_ID="stopped-300")
        one = run(bins, linger, ["cat", "/etc/hostname"], dep.tmp)[1]
    finally:
        dep.agent.send_signal(signal.SIGCONT)
    print(f"stopped agent: {n} runs with IOTRACE_LINGER_MS=0 {took:.2f} s; "
          f"one with 300 ms {one:.2f} s")
    assert took < 5.0, f"{n} traced runs with a stopped agent and no linger took {took:.2f} s"
    assert 0.3 <= one < 5.0, f"IOTRACE_LINGER_MS=300 against a stopped agent: {one:.2f} s"
    # What the stopped agent did not take went into its drop box: nothing
    # is missing once it goes on (cat opens, reads and closes: 4 events).
    for job, count in (("stopped", n), ("stopped-300", 1)):
        ev = dep.wait_for(lambda ev: len(accounted(ev)) >= count, job=job, timeout=60)
        print(f"{job}: {sum(accounted(ev).values())} events of {len(accounted(ev))} processes stored")


def main():
    bins = parse_bins(sys.argv[1:])
    dep = Deployment(bins).start()
    try:
        abuse_cases(bins, dep)
        no_agent(bins, dep)
    finally:
        dep.stop()


if __name__ == "__main__":
    main()
