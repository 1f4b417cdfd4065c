#!/usr/bin/env python3
"""What a hostile local user (nobody) cannot make the collector believe,
against a root agent and collector on one machine:

- clock: an agent's batch with a clock sample of +3600 s, handed to root's
  agent, is refused there; root's events keep their times;
- label: nobody's producer saying it runs on node cn-OTHER is stored under
  the agent's node, cn-root;
- keys: an agent of nobody's, with a key admitted for node cn-nobody, that
  says HELLO as cn-root is not welcomed and none of its batches is stored;
  as cn-nobody it is, under that node only;
- stamp: of random changes to the via, sender and stamp bytes an agent
  appends, none that makes a batch say another node or user is stored;
- jobs: nobody names the predictable job id 4711 first; root's processes
  that Slurm's cgroup (made here as slurmd would, cgroup v1) puts in job
  4711 still own it: --job 4711 is root's events, nobody's are 4711~u65534;
- listen: --listen tcp://127.x.invalid:5555 is beyond loopback (a name, not
  a loopback address) and needs CURVE;
- and a collector without CURVE says at start what any local user can do."""
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import check, failures, finish, free_port, until  # noqa: E402

COLLECTOR, AGENT, PRODUCER, EXPORT, CLIENT = sys.argv[1:6]
NOBODY = 65534


def as_nobody(cmd):
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] + cmd


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)


class Procs:
    def __init__(self, tmp):
        self.tmp, self.procs, self.logs = tmp, [], {}

    def start(self, name, cmd):
        path = os.path.join(self.tmp, name + ".log")
        log = open(path, "wb")
        self.logs[name] = path
        self.procs.append(subprocess.Popen(cmd, stderr=log))
        return self.procs[-1]

    def text(self, name):
        return open(self.logs[name], errors="replace").read()

    def agent(self, name, sock, node, port, *extra, user=None):
        cmd = [AGENT, "--collector", f"tcp://127.0.0.1:{port}", "--listen", "ipc://" + sock,
               "--node", node, "--state-dir", "none", "--stats-interval", "0.2s", *extra]
        self.start(name, as_nobody(cmd) if user else cmd)
        check(until(lambda: os.path.exists(sock), 30), f"agent {name} did not start:\n" + self.text(name))

    def plain_node(self, name):
        """A collector without CURVE and root's agent of node cn-root: the
        agent's socket and the store."""
        port, store = free_port(), os.path.join(self.tmp, "store-" + name)
        self.start("collector-" + name, [COLLECTOR, "--listen", f"tcp://127.0.0.1:{port}", "--store", store,
                                         "--http", "off"])
        sock = os.path.join(self.tmp, "run", name + ".sock")
        self.agent("agent-" + name, sock, "cn-root", port)
        return sock, store

    def stop(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        self.procs = []


def produce(sock, node, job, batches, per, *extra, user=None):
    cmd = [PRODUCER, "--agent", "ipc://" + sock, "--node", node, "--job", job,
           "--batches", str(batches), "--events-per-batch", str(per), *extra]
    r = run(as_nobody(cmd) if user else cmd)
    check(r.returncode == 0, f"producer {job}: {r.stderr}")


def events(store):
    r = run([EXPORT, "--store", store, "--jsonl", "-"])
    return [e for e in map(json.loads, r.stdout.splitlines()) if e["kind"] != "drop"]


def by_job(evs):
    jobs = {}
    for e in evs:
        jobs.setdefault(e["job"], []).append(e)
    return jobs


def clock_and_label(tmp):
    """Item: clock samples through the agent's socket, node labels."""
    p = Procs(tmp)
    try:
        sock, store = p.plain_node("plain")
        t0 = time.time()
        produce(sock, "cn-root", "rootjob", 5, 100)
        produce(sock, "cn-root", "forged-clock", 1, 1, "--bad", "clock", user=True)
        produce(sock, "cn-OTHER", "nobodyjob", 2, 50, user=True)
        produce(sock, "cn-root", "rootjob", 5, 100)
        got = {}
        until(lambda: got.update(by_job(events(store))) or
              (len(got.get("rootjob", [])) >= 1000 and len(got.get("nobodyjob", [])) >= 100), 60)
        root = got.get("rootjob", [])
        check(len(root) == 1000, f"root's events: {len(root)} of 1000 stored")
        shift = max((abs(e["t_start"] / 1e9 - t0) for e in root), default=0)
        check(shift < 600, f"root's events moved in time by up to {shift:.0f} s (a forged clock sample)")
        invalid = until(lambda: "says it is an agent's" in p.text("agent-plain"), 30)
        check(invalid, "root's agent did not refuse nobody's agent batch:\n" + p.text("agent-plain")[-2000:])
        nodes = sorted({e["node"] for e in got.get("nobodyjob", [])})
        check(nodes == ["cn-root"], f"nobody's events labelled with nodes {nodes}, not its agent's")
        warned = "agents are not authenticated" in p.text("collector-plain")
        check(warned, "a collector without CURVE does not say what local users can do")
        print(f"ok: clock: nobody's +3600 s sample refused by the agent; root's 1000 events within "
              f"{shift:.1f} s of their making; label: nobody's 100 events of cn-OTHER stored as {nodes}")
    finally:
        p.stop()


def keys(tmp):
    """Item: keys bound to nodes in --curve-clients."""
    p = Procs(tmp)
    keydir, clients, mine = (os.path.join(tmp, d) for d in ("keys", "agents", "nobody"))
    for d in (keydir, clients, mine):
        os.makedirs(d, exist_ok=True)
    os.chown(mine, NOBODY, NOBODY)
    for prog, path, user in ((COLLECTOR, os.path.join(keydir, "collector"), False),
                             (AGENT, os.path.join(keydir, "root"), False),
                             (AGENT, os.path.join(mine, "key"), True)):
        r = run(as_nobody([prog, "--keygen", path]) if user else [prog, "--keygen", path])
        check(r.returncode == 0, f"--keygen {path}: {r.stderr}")
    # Root's key for cn-root by its file name; nobody's admitted, for cn-nobody by a line.
    with open(os.path.join(keydir, "root.pub")) as f, open(os.path.join(clients, "cn-root.pub"), "w") as o:
        o.write(f.read())
    with open(os.path.join(mine, "key.pub")) as f, open(os.path.join(clients, "lab.pub"), "w") as o:
        o.write(f.read() + "node = cn-nobody\n")
    port, store = free_port(), os.path.join(tmp, "store-curve")
    pub = os.path.join(keydir, "collector.pub")
    try:
        p.start("collector-curve", [COLLECTOR, "--listen", f"tcp://127.0.0.1:{port}", "--store", store,
                                    "--http", "off", "--curve-key", os.path.join(keydir, "collector"),
                                    "--curve-clients", clients])
        root_sock = os.path.join(tmp, "run", "curve-root.sock")
        p.agent("agent-curve-root", root_sock, "cn-root", port, "--curve-key", os.path.join(keydir, "root"),
                "--collector-key", pub)
        squat_sock, own_sock = os.path.join(mine, "squat.sock"), os.path.join(mine, "own.sock")
        curve = ("--curve-key", os.path.join(mine, "key"), "--collector-key", pub)
        p.agent("agent-squat", squat_sock, "cn-root", port, *curve, user=True)
        p.agent("agent-own", own_sock, "cn-nobody", port, *curve, user=True)
        produce(root_sock, "cn-root", "rootjob", 3, 100)
        produce(squat_sock, "cn-root", "squat", 3, 100, user=True)
        produce(own_sock, "cn-nobody", "own", 3, 100, user=True)
        got = {}
        until(lambda: got.update(by_job(events(store))) or
              (len(got.get("rootjob", [])) >= 300 and len(got.get("own", [])) >= 300), 60)
        refused = until(lambda: "refused the HELLO of node 'cn-root'" in p.text("collector-curve"), 30)
        time.sleep(2)  # what the squatting agent might still get in would be stored by now
        got = by_job(events(store))
        check(len(got.get("rootjob", [])) == 300, f"root's 300 events: {len(got.get('rootjob', []))}")
        check(len(got.get("own", [])) == 300, f"nobody's own node's 300 events: {len(got.get('own', []))}")
        check("squat" not in got, f"{len(got.get('squat', []))} events stored from nobody's agent as cn-root")
        check(refused, "the collector did not refuse the HELLO of cn-root with nobody's key:\n"
              + p.text("collector-curve")[-2000:])
        nodes = sorted({e["node"] for e in got.get("own", [])})
        check(nodes == ["cn-nobody"], f"nobody's events labelled {nodes}")
        print(f"ok: keys: nobody's key (cn-nobody) refused as cn-root, 0 of its 300 events stored there; "
              f"as cn-nobody 300 stored under {nodes}; root's 300 stored")
    finally:
        p.stop()


def stamp(tmp):
    """Item: via and sender under the agent's stamp checksum."""
    p = Procs(tmp)
    port = free_port()
    try:
        p.start("collector-stamp", [COLLECTOR, "--listen", f"tcp://127.0.0.1:{port}", "--store",
                                    os.path.join(tmp, "store-stamp"), "--http", "off"])
        until(lambda: "listening on" in p.text("collector-stamp"), 30)
        r = run(as_nobody([CLIENT, f"tcp://127.0.0.1:{port}", "stamp", "64"]))
        check(r.returncode == 0, f"stamp mutations: {r.stdout} {r.stderr}")
        print("ok: " + r.stdout.strip())
    finally:
        p.stop()


def slurm_cgroup(job):
    """The cgroup v1 directory slurmd makes for a step of `job` run as root,
    made here (with the directories above it that were not there), or None
    where no v1 hierarchy can be written."""
    base = "/sys/fs/cgroup/freezer"
    if not os.path.isdir(base) or os.path.exists(os.path.join(base, "slurm")):
        return None, []
    made = []
    path = base
    for part in ("slurm", "uid_0", f"job_{job}", "step_0"):
        path = os.path.join(path, part)
        try:
            os.mkdir(path)
        except OSError:
            return None, made
        made.append(path)
    return path, made


def jobs(tmp):
    """Item: job-id squatting."""
    cg, made = slurm_cgroup(4711)
    if not cg:
        for d in reversed(made):
            os.rmdir(d)
        print("skipped: jobs: no cgroup v1 hierarchy to make a Slurm job's cgroup in")
        return
    p = Procs(tmp)
    try:
        sock, store = p.plain_node("jobs")
        produce(sock, "cn-root", "4711", 3, 50, user=True)
        # Root's rank, put in the job's cgroup before it starts, as slurmstepd does;
        # paced over 4 s, so that the agent sees it alive for some of its batches
        # even on a loaded machine (one suffices).
        cmd = [PRODUCER, "--agent", "ipc://" + sock, "--node", "cn-root", "--job", "4711",
               "--batches", "8", "--events-per-batch", "25", "--rate", "50"]
        r = run(["sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec "$@"', "sh"] + cmd)
        check(r.returncode == 0, f"root's producer in the job's cgroup: {r.stderr}")
        got = {}
        until(lambda: got.update(by_job(events(store))) or
              sum(len(v) for k, v in got.items() if k.startswith("4711")) >= 350, 60)
        owner = got.get("4711", [])
        squat = got.get("4711~u65534", [])
        uids = sorted({e["uid"] for e in owner})
        check(len(owner) == 200 and uids == [0], f"job 4711: {len(owner)} events of uids {uids}, want root's 200")
        check(len(squat) == 150, f"nobody's events kept apart as 4711~u65534: {len(squat)} of 150 ({sorted(got)})")
        r = run([EXPORT, "--store", store, "--job", "4711", "--jsonl", "-"])
        shown = [json.loads(line)["uid"] for line in r.stdout.splitlines()]
        check(shown and set(shown) == {0}, f"--job 4711 shows uids {sorted(set(shown))}")
        print(f"ok: jobs: nobody named 4711 first; root's {len(owner)} events in 4711 (the launcher's "
              f"cgroup), nobody's {len(squat)} in 4711~u65534; --job 4711 shows uid 0 only")
    finally:
        p.stop()
        for d in reversed(made):
            try:
                os.rmdir(d)
            except OSError as e:
                check(False, f"cannot remove {d}: {e}")


def listen(tmp):
    """Item: a loopback endpoint is a loopback address, not a prefix."""
    for ep in ("tcp://127.x.invalid:5555", "tcp://127.0.0.1.example:5555"):
        r = run(as_nobody([COLLECTOR, "--listen", ep, "--store", os.path.join(tmp, "never"), "--http", "off"]))
        check(r.returncode == 2 and "beyond loopback" in r.stderr, f"collector --listen {ep}: rc {r.returncode} {r.stderr}")
        r = run(as_nobody([AGENT, "--collector", ep, "--listen", "ipc://" + os.path.join(tmp, "never.sock")]))
        check(r.returncode == 2 and "beyond loopback" in r.stderr, f"agent --collector {ep}: rc {r.returncode} {r.stderr}")
    print("ok: listen: names that start like 127.* need CURVE (exit 2), for the collector and the agent")


def main():
    if os.geteuid() != 0:
        print("skipped: needs root to act as another user")
        return 0
    tmp = tempfile.mkdtemp(prefix="iotrace-trust-")
    os.chmod(tmp, 0o755)
    os.makedirs(os.path.join(tmp, "run"), mode=0o755)
    for scenario in (listen, stamp, clock_and_label, keys, jobs):
        scenario(tmp)
    return finish(tmp)


if __name__ == "__main__":
    sys.exit(main())
