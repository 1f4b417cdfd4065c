"""A cluster of network-namespace hosts for a test (deploy/cluster.sh):
brought up with a prefix and directory of its own, always taken down, its
hosts' logs shown when the test fails."""
import argparse
import collections
import json
import os
import subprocess
import sys
import time

PREFIX = "iott"          # not the default (iotc): a cluster made by hand stays
DIR = "/var/tmp/iotrace-cluster-test"


def parse_args(extra=()):
    p = argparse.ArgumentParser()
    p.add_argument("--cluster-sh", required=True)
    p.add_argument("--build", required=True)
    p.add_argument("--app", required=True, help="mpiio_mix")
    for name in extra:
        p.add_argument(name)
    return p.parse_args()


def skip_unless_possible():
    if os.geteuid() != 0:
        print("skipped: needs root (namespaces, mounts, bricks)")
        sys.exit(77)
    if not os.path.exists("/dev/fuse"):
        print("skipped: /dev/fuse missing")
        sys.exit(77)


class Cluster:
    def __init__(self, args, *up_args):
        self.sh = args.cluster_sh
        self.build = args.build
        self.up_args = list(up_args)

    def run(self, *cmd, check=True, timeout=300, env=None, capture=True):
        full = [self.sh, "--dir", DIR, "--prefix", PREFIX, "--build", self.build] + list(cmd)
        r = subprocess.run(full, text=True, timeout=timeout, env=env,
                           stdout=subprocess.PIPE if capture else None,
                           stderr=subprocess.PIPE if capture else None)
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(cmd[:3])}... exited {r.returncode}\n"
                                 f"{r.stdout[-3000:] if r.stdout else ''}{r.stderr[-3000:] if r.stderr else ''}")
        return r

    def __enter__(self):
        self.run("down", check=False)
        t = time.time()
        r = self.run("up", *self.up_args, timeout=180)
        self.up_seconds = time.time() - t
        print(r.stdout.strip())
        print(f"cluster up in {self.up_seconds:.1f} s")
        return self

    def __exit__(self, kind, value, tb):
        if kind is not None:
            self.show_logs()
        r = self.run("down", check=False)
        left = leftovers()
        if left:
            print("left behind after down: " + left, file=sys.stderr)
            if kind is None:
                raise AssertionError("cluster.sh down left " + left)
        return False

    def show_logs(self):
        base = os.path.join(DIR, "hosts")
        if not os.path.isdir(base):
            return
        for host in sorted(os.listdir(base)):
            logdir = os.path.join(base, host, "log")
            for name in sorted(os.listdir(logdir)) if os.path.isdir(logdir) else []:
                path = os.path.join(logdir, name)
                with open(path, errors="replace") as f:
                    tail = f.read()[-2000:]
                if tail.strip():
                    print(f"----- {host}/{name} -----\n{tail}", file=sys.stderr)

    def exec(self, host, *cmd, **kw):
        return self.run("exec", host, *cmd, **kw)

    def mpiexec(self, *args, timeout=300):
        t = time.time()
        r = self.run("mpiexec", *args, timeout=timeout)
        return r, time.time() - t

    def export(self, *args):
        return self.run("export", *args).stdout

    def events(self, job=None):
        out = self.export("--jsonl", "-", *(["--job", job] if job else []))
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def stats(self, job):
        return json.loads(self.export("--stats", "--format", "json", "--job", job))["jobs"][0]

    def jobs(self):
        """job -> {ranks, nodes, events, dropped}, from --list-jobs."""
        out = {}
        for line in self.export("--list-jobs").splitlines():
            f = line.split()
            if f:
                out[f[0]] = dict(kv.split("=", 1) for kv in f[1:] if "=" in kv)
        return out

    def wait_settled(self, job, ranks, timeout=60):
        """Until the store holds the job's events and their count stops
        growing for 3 s (the agents forward within their flush interval)."""
        deadline = time.time() + timeout
        last, since = None, time.time()
        while time.time() < deadline:
            j = self.jobs().get(job)
            n = j and int(j.get("events", 0))
            if j and int(j.get("ranks", 0)) >= ranks and n == last:
                if time.time() - since >= 3:
                    return j
            else:
                last, since = n, time.time()
            time.sleep(0.5)
        raise AssertionError(f"job {job} did not settle: {self.jobs()}")


def leftovers():
    """Namespaces, mounts and processes of the test cluster still there."""
    out = []
    ns = subprocess.run(["ip", "netns", "list"], text=True, capture_output=True).stdout
    out += [line.split()[0] for line in ns.splitlines() if line.startswith(PREFIX + "-")]
    with open("/proc/mounts") as f:
        out += [line.split()[1] for line in f if DIR in line]
    ps = subprocess.run(["ps", "-eo", "pid=,args="], text=True, capture_output=True).stdout
    out += [line.strip()[:80] for line in ps.splitlines() if DIR in line]
    if os.path.exists(DIR):
        out.append(DIR)
    return ", ".join(out)


RANK_WRAPPER = 'echo "$PMI_RANK $(hostname) $$" > "$0/rank.$PMI_RANK"; exec "$@"'


def placed_ranks(truth_dir):
    """rank -> (host, pid), as the ranks wrote them (RANK_WRAPPER)."""
    out = {}
    for name in os.listdir(truth_dir):
        if name.startswith("rank."):
            with open(os.path.join(truth_dir, name)) as f:
                r, host, pid = f.read().split()
            out[int(r)] = (host, int(pid))
    return out


def per_rank_calls(events, job):
    c = collections.Counter()
    for e in events:
        if e["job"] == job and e["kind"] == "mpiio":
            c[(e["mpi_rank"], e["func"])] += 1
    return c


def finish(failures):
    """The exit status of a cluster test: 1 with the number of failed checks."""
    left = leftovers()
    if left:
        failures.append(f"left behind: {left}")
        print(f"FAIL: left behind: {left}", file=sys.stderr)
    if failures:
        print(f"FAILED: {len(failures)} check(s)")
        return 1
    print("ok")
    return 0
