#!/usr/bin/env python3
"""The agent's drop box as another user meets it (docs/agent.md, "The drop
box"):

- the agent makes it mode 1733 beside its socket; user nobody can leave
  files in it but can neither list it nor remove a file of another user;
- a process of nobody that ends while the agent is down leaves its batches
  there (the library says how many); when the agent starts they are stored
  under nobody's uid, and stored + dropped = made, exactly;
- garbage, a symbolic link, a file with two links, a file over 16 MiB and
  a root file are removed and counted as invalid, never stored (of a
  file's two names the second, then alone, is taken: nobody's own batch
  again, a duplicate); a stale temporary file is removed, a fresh one left
  for its writer;
- a drop box someone else owns is not used: the agent says so and runs;
- a process of nobody that ends while the agent is frozen leaves its running
  total there, and what ZeroMQ threw away at its exit is counted as lost.

usage: test_dropbox.py --collector=... --agent=... --export=... --client=... ..."""
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Deployment, accounted, exit_reports, parse_bins, sanitizer_env  # noqa: E402

NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
JOB = "boxjob"
FROZEN_JOB = "frozen-agent"


def as_nobody(cmd, env=None):
    return subprocess.run(NOBODY + cmd, capture_output=True, text=True, timeout=60, env=env)


def stop_agent(dep, sig=signal.SIGTERM):
    dep.agent.send_signal(sig)
    dep.agent.wait(timeout=30)


def frozen_agent(bins):
    """A process of nobody ends while the root agent is frozen (SIGSTOP)
    after it connected: its last batches, accepted by ZeroMQ but never read,
    are thrown away when the linger runs out, and the running total it
    leaves in the drop box (owned by nobody) makes readers count them as
    lost, under uid 65534: stored + dropped = made."""
    dep = Deployment(bins)
    os.chmod(dep.tmp, 0o755)
    data = os.path.join(dep.tmp, "nobody")
    os.mkdir(data)
    os.chown(data, 65534, 65534)
    try:
        dep.start()
        env = dict(os.environ, LD_PRELOAD=bins["preload_prefix"] + bins["client"],
                   IOTRACE_AGENT=dep.endpoint, IOTRACE_JOB_ID=FROZEN_JOB, IOTRACE_VERBOSE="1",
                   **sanitizer_env(bins))
        # 500 ms of quiet, in which the library connects, then 200 000 calls:
        # about 800 KB of batches, more than the socket's kernel buffers hold
        # and fewer batches than ZeroMQ queues.
        proc = subprocess.Popen(NOBODY + [bins["burst_app"], os.path.join(data, "f"), "1", "200000", "500"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        rc, err = dep.frozen_at_exit(proc, 0.25, timeout=60)
        assert rc == 0, err
        made = {pid: r["made"] for pid, r in exit_reports(err).items()}
        assert made, err
        left = "running total of" in err

        try:
            dep.wait_for(lambda ev: all(accounted(ev)[p] >= m for p, m in made.items()), job=FROZEN_JOB,
                         timeout=30)
        except AssertionError:
            pass  # the comparison below says what is missing
        time.sleep(1.0)
        events = dep.export(FROZEN_JOB)
        assert {e["uid"] for e in events} == {65534}, {e["uid"] for e in events}
        got = accounted(events)
        lost = sum(e["dropped"] for e in events if e["kind"] == "drop" and e["reason"] == "lost")
        assert dict(got) == made, f"stored + dropped {dict(got)}, made {made}"
        print(f"ok: nobody's process ended while the root agent was frozen: {sum(made.values())} "
              f"events made, stored + dropped under uid 65534 exactly ({lost} lost"
              f"{', found from the running total it left in the drop box' if left else ''})")
    finally:
        dep.stop()


def main():
    if os.geteuid() != 0:
        print("skipped: needs root to act as another user")
        sys.exit(77)
    bins = parse_bins(sys.argv[1:])
    dep = Deployment(bins)
    os.chmod(dep.tmp, 0o755)
    try:
        dep.start()
        box = dep.sock + ".dropbox"
        st = os.stat(box)
        assert st.st_mode & 0o7777 == 0o1733 and st.st_uid == 0, f"drop box {st.st_mode:o} uid {st.st_uid}"
        # Killed: its socket file stays, and vouches for the drop box (a
        # stopped agent removes it, and processes then leave nothing there).
        stop_agent(dep, signal.SIGKILL)

        # nobody's process ends with no agent: its batches go to the drop box.
        env = dict(os.environ, LD_PRELOAD=bins["preload_prefix"] + bins["client"],
                   IOTRACE_AGENT=dep.endpoint, IOTRACE_JOB_ID=JOB, IOTRACE_VERBOSE="1",
                   **sanitizer_env(bins))
        if "ASAN_OPTIONS" in env:  # Python's own allocations, not the library's
            env["ASAN_OPTIONS"] += ":detect_leaks=0"
        # (not cat: coreutils close stderr at exit, before the library reports)
        r = as_nobody(["/usr/bin/python3", "-c", "open('/etc/os-release').read()"], env)
        assert r.returncode == 0, r.stderr
        made = {pid: rep["made"] for pid, rep in exit_reports(r.stderr).items() if rep["boxed"] > 0}
        assert made and sum(made.values()) > 0, r.stderr
        as_root = os.listdir(box)
        assert as_root and all(os.stat(os.path.join(box, f)).st_uid == 65534 for f in as_root), as_root
        valid = as_root[0]

        # What nobody may and may not do there.
        r = as_nobody(["ls", box])
        assert r.returncode != 0, "nobody could list the drop box"
        with open(os.path.join(box, "zz-root"), "wb") as f:
            f.write(b"root's file\n")
        r = as_nobody(["rm", "-f", os.path.join(box, "zz-root")])
        assert os.path.exists(os.path.join(box, "zz-root")), "nobody removed root's file"
        script = (f"cd {box} && head -c 100 /dev/urandom > garbage && ln -s /etc/passwd link && "
                  f"cp {valid} copy && ln copy copy2 && truncate -s 17M big && "
                  "touch -d '1 hour ago' .stale && touch .fresh")
        r = as_nobody(["sh", "-c", script])
        assert r.returncode == 0, r.stderr
        # Of the two names of one file the first looked at is refused; the
        # other then has one link and is taken: a copy of nobody's own batch,
        # which the collector discards as a duplicate.
        refused = {"zz-root", "garbage", "link", "copy or copy2", "big"}

        dep.start_agent()
        events = dep.wait_for(lambda ev: sum(1 for e in ev if e["job"] == JOB) > 0, job=JOB, timeout=30)
        deadline = time.time() + 10
        while set(os.listdir(box)) != {".fresh"} and time.time() < deadline:
            time.sleep(0.2)
        assert set(os.listdir(box)) == {".fresh"}, os.listdir(box)
        time.sleep(1.0)
        events = dep.export(JOB)
        assert {e["uid"] for e in events} == {65534}, {e["uid"] for e in events}
        got = accounted(events)
        assert dict(got) == made, f"stored + dropped {dict(got)}, made {made}"
        stop_agent(dep)
        log = open(os.path.join(dep.tmp, "agent.log"), errors="replace").read()
        m = re.findall(r"stats: received=\d+ invalid=(\d+) .* duplicate=(\d+)", log)
        assert m and int(m[-1][0]) == len(refused) and int(m[-1][1]) >= 1, \
            f"invalid, duplicate = {m[-1] if m else None}, want {len(refused)}, at least 1"
        print(f"ok: drop box 1733, not listable or clearable by nobody; nobody's process left "
              f"{len(as_root)} batches with the agent down: {sum(made.values())} events made, "
              f"stored + dropped under uid 65534 exactly; {len(refused)} planted files refused "
              f"({', '.join(sorted(refused))}), a stale temporary file removed, a fresh one kept")

        # A drop box of another user is not used, by the agent nor by a
        # process whose agent is down.
        os.unlink(os.path.join(box, ".fresh"))
        os.rmdir(box)
        os.mkdir(box)
        os.chown(box, 65534, 65534)
        dep.start_agent()
        time.sleep(0.5)
        assert dep.agent.poll() is None, "the agent did not run"
        log = open(os.path.join(dep.tmp, "agent.log"), errors="replace").read()
        assert "belongs to uid 65534" in log and "running without a drop box" in log, log[-2000:]
        stop_agent(dep, signal.SIGKILL)
        r = as_nobody(["/usr/bin/python3", "-c", "open('/etc/os-release').read()"], env)
        assert r.returncode == 0 and not os.listdir(box), (r.stderr, os.listdir(box))
        assert re.search(r"[1-9]\d* lost with no batch left to count them", r.stderr), r.stderr
        os.rmdir(box)
        os.mkdir(box)
        os.chmod(box, 0o1777)  # root's, but not the agent's mode: not used either
        r = as_nobody(["/usr/bin/python3", "-c", "open('/etc/os-release').read()"], env)
        assert r.returncode == 0 and not os.listdir(box), (r.stderr, os.listdir(box))
        print("ok: a drop box owned by nobody is not used, by the agent nor by a process; "
              "one with another mode is not used by a process")
    finally:
        dep.stop()
    frozen_agent(bins)


if __name__ == "__main__":
    main()
