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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import check  # noqa: E402

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
        if os.environ.get("IOTRACE_CLUSTER_KEEP"):
            # By hand, to look at a failure: cluster.sh --dir DIR --prefix
            # PREFIX down removes it afterwards.
            print(f"IOTRACE_CLUSTER_KEEP: the cluster stays in {DIR} (prefix {PREFIX})")
            return False
        self.run("down", check=False)
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

    def wait_settled(self, job, ranks, timeout=60, quiet=3):
        """Until the store holds the job's events and their count stops
        growing for quiet seconds (the agents forward within their flush
        interval)."""
        deadline = time.time() + timeout
        last, since = None, time.time()
        while time.time() < deadline:
            j = self.jobs().get(job)
            n = j and int(j.get("events", 0))
            if j and int(j.get("ranks", 0)) >= ranks and n == last:
                if time.time() - since >= quiet:
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


# sh -c RANK_WRAPPER TRUTH_DIR PROG ARGS...: each rank writes down its rank
# (Hydra's PMI_RANK, or Slurm's SLURM_PROCID), host, pid and, under Slurm,
# its job and step, then becomes PROG (same pid).
RANK_WRAPPER = ('r=${PMI_RANK:-$SLURM_PROCID}; '
                'echo "$r $(hostname) $$ ${SLURM_JOB_ID:--} ${SLURM_STEP_ID:--}" > "$0/rank.$r"; exec "$@"')


def placed_ranks(truth_dir):
    """rank -> (host, pid), as the ranks wrote them (RANK_WRAPPER)."""
    out = {}
    for name in os.listdir(truth_dir):
        if name.startswith("rank."):
            with open(os.path.join(truth_dir, name)) as f:
                r, host, pid = f.read().split()[:3]
            out[int(r)] = (host, int(pid))
    return out


def slurm_steps(truth_dir):
    """The (job id, step id) pairs the ranks wrote down (RANK_WRAPPER)."""
    out = set()
    for name in os.listdir(truth_dir):
        if name.startswith("rank."):
            with open(os.path.join(truth_dir, name)) as f:
                out.add(tuple(f.read().split()[3:5]))
    return out


def per_rank_calls(events, job):
    c = collections.Counter()
    for e in events:
        if e["job"] == job and e["kind"] == "mpiio":
            c[(e["mpi_rank"], e["func"])] += 1
    return c


def finish(failures):
    """The exit status of a cluster test: 1 with the number of failed checks."""
    left = "" if os.environ.get("IOTRACE_CLUSTER_KEEP") else leftovers()
    if left:
        failures.append(f"left behind: {left}")
        print(f"FAIL: left behind: {left}", file=sys.stderr)
    if failures:
        print(f"FAILED: {len(failures)} check(s)")
        return 1
    print("ok")
    return 0


# mpiio_mix's calls per rank (tests/mpi/mpiio_mix.c).
ONCE = ("close get_size iread_all iread_at iwrite_at iwrite_at_all open read read_all "
        "read_all_begin read_all_end read_at read_at_all read_ordered set_atomicity sync write "
        "write_all write_at write_at_all write_at_all_begin write_at_all_end write_at_c "
        "write_ordered write_shared").split()
PER_RANK = {f"MPI_File_{f}": 1 for f in ONCE}
PER_RANK.update({"MPI_File_seek": 5, "MPI_File_seek_shared": 3, "MPI_File_set_view": 2,
                 "MPI_Test": 1, "MPI_Wait": 1, "MPI_Waitall": 1, "MPI_Waitany": 1})
DISK_RW = ("read", "write", "readv", "writev")


def check_attribution(c, job, truth, storage_hosts, nprocs=4):
    """A job of mpiio_mix, its ranks placed as RANK_WRAPPER wrote them in
    truth: every call once per rank with its host and pid, every brick
    read/write with a CallID of one of its calls, nothing unmatched."""
    j = c.wait_settled(job, nprocs)
    events = [e for e in c.events(job) if e["job"] == job]
    placed = placed_ranks(truth)
    hosts = collections.Counter(h for h, _ in placed.values())
    print(f"{job}: ranks placed {dict(sorted(placed.items()))}; stored {j}")
    check(sorted(placed) == list(range(nprocs)), f"ranks that ran: {sorted(placed)}")
    check(hosts == {"compute1": 2, "compute2": 2}, f"ranks per host {dict(hosts)}, want 2 and 2")

    calls = [e for e in events if e["kind"] == "mpiio"]
    for e in calls:
        host, pid = placed.get(e["mpi_rank"], (None, None))
        if not check(e["node"] == host and e["pid"] == pid,
                     f"rank {e['mpi_rank']}'s {e['func']} stored as node {e['node']} pid {e['pid']}, "
                     f"ran on {host} as {pid}"):
            break
    per_rank = per_rank_calls(events, job)
    bad = []
    for rank in range(nprocs):
        for func in set(PER_RANK) | {f for (r, f) in per_rank if r == rank}:
            got, want = per_rank.get((rank, func), 0), PER_RANK.get(func, 0)
            if got != want:
                bad.append(f"rank {rank} {func}: {got} (want {want})")
    check(not bad, "calls not recorded exactly once per rank: " + "; ".join(bad[:10]))
    print(f"{job}: {len(calls)} MPI-IO calls, each function per rank as mpiio_mix makes them")

    ids = {e["callid"] for e in calls}
    disk = [e for e in events if e["kind"] == "disk"]
    rw = [e for e in disk if e["func"] in DISK_RW]
    per_host = collections.Counter(e["node"] for e in rw)
    untagged = [e for e in rw if e["callid"] is None]
    foreign = [e for e in rw if e["callid"] is not None and e["callid"] not in ids]
    elsewhere = [e for e in disk if e["node"] not in storage_hosts]
    print(f"{job}: {len(disk)} disk operations, {len(rw)} reads and writes per storage host "
          f"{dict(sorted(per_host.items()))}; without CallID {len(untagged)}, "
          f"with a CallID of no call {len(foreign)}")
    check(set(per_host) == set(storage_hosts), f"storage hosts with reads/writes: {sorted(per_host)}")
    check(not untagged, f"{len(untagged)} brick reads/writes without a CallID, e.g. {untagged[:1]}")
    check(not foreign, f"{len(foreign)} brick reads/writes with a CallID of no call, e.g. {foreign[:1]}")
    check(not elsewhere, f"disk operations stored from other hosts: {elsewhere[:1]}")

    st = c.stats(job)
    print(f"{job}: --stats unmatched_calls={st['unmatched_calls']} "
          f"unmatched_disk_ops={st['unmatched_disk_ops']} dropped_events={st['dropped_events']}")
    if st["unmatched_disk_ops"]:
        # Which ones: tagged, and outside every interval of their CallID's call.
        spans = collections.defaultdict(list)
        for e in calls:
            spans[e["callid"]].append((e["t_start"], e["t_end"], e["func"]))
        for e in disk:
            if e["callid"] is None:
                continue
            sp = spans.get(e["callid"], [])
            if not any(a <= e["t_start"] and e["t_end"] <= b for a, b, _ in sp):
                near = min(sp, key=lambda x: abs(x[0] - e["t_start"])) if sp else None
                print(f"{job}: disk {e['func']} on {e['node']} callid {e['callid']} "
                      f"[{e['t_start']}, {e['t_end']}] outside its call "
                      + (f"{near[2]} [{near[0]}, {near[1]}]: starts {(e['t_start'] - near[0]) / 1e3:.0f} us "
                         f"after it, ends {(e['t_end'] - near[1]) / 1e3:.0f} us after its end" if near else "(none)"))
    # Collective calls are matched as a group (the aggregators' I/O); the
    # independent ones on their own. A read a compute host's kernel answers
    # from its page cache makes no request: no disk operation can carry its
    # CallID. GlusterFS's FUSE client (10.3, and its master still) now and
    # then opens the file cached on the host that created it despite
    # direct-io-mode=enable: fuse_fd_inherit_directio() gives an OPEN the
    # direct-io flag of the inode's newest open fd, and the CREATE's fd
    # records none (fuse_create_cbk never sets its fd context's
    # open_flags), so an OPEN that comes while ROMIO's creating fd is not
    # yet released is cached, and so are the opens after it. Its reads
    # take microseconds. Independent reads on that host are named and
    # counted; any other call without a disk operation fails.
    hit = {e["callid"] for e in disk}
    posix_ns = collections.defaultdict(int)
    for e in events:
        if e["kind"] == "posix" and e["func"] in ("pread", "pread64", "read", "preadv", "readv"):
            posix_ns[e["callid"]] += e["t_end"] - e["t_start"]
    alone = [e for e in calls if e["bytes"] and e["callid"] not in hit and not e.get("coll_seq")
             and not e["func"].startswith(("MPI_Wait", "MPI_Test")) and not e["func"].endswith("_end")]
    # On the host of rank 0, which created the file.
    creator = next((e["node"] for e in calls if e["mpi_rank"] == 0), None)
    cached = [e for e in alone if "read" in e["func"] and e["node"] == creator]
    if alone:
        print(f"{job}: calls with bytes whose CallID no disk operation carries: "
              + ", ".join(f"{e['func']} rank {e['mpi_rank']} ({posix_ns[e['callid']]} ns in POSIX reads)"
                          for e in alone))
    check(len(cached) == len(alone) == st["unmatched_calls"],
          f"unmatched_calls {st['unmatched_calls']}, {len(cached)} of them independent reads on "
          f"{creator}, which created the file")
    check(st["unmatched_disk_ops"] == 0, f"unmatched_disk_ops {st['unmatched_disk_ops']}")
    check(st["dropped_events"] == 0, f"dropped_events {st['dropped_events']}")
