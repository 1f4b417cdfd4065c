#!/usr/bin/env python3
"""Attribution across hosts (deploy/cluster.sh, docs/cluster.md).

A cluster of namespace hosts: a collector host, 2 compute hosts, and storage
hosts holding a replicate volume (2 hosts) and then a disperse volume (3
hosts). mpiio_mix (independent, collective, split collective,
non-blocking and shared-pointer calls) runs as 4 ranks spread over the
compute hosts by mpiexec through the hosts' launcher. Checks, per volume:

- the ranks ran 2 per compute host (as each rank wrote down), and every
  rank's calls are stored with its own host as node and its own pid;
- every rank's MPI-IO calls exactly once: the count of every function per
  rank is mpiio_mix's, none missing, none twice;
- every read or write on a brick is stored by its storage host's agent,
  carries a CallID, and that CallID is one of the job's calls; every
  storage host has some;
- --stats: unmatched_calls 0, unmatched_disk_ops 0, dropped 0;
- nothing of the cluster is left after down.
"""
import collections
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import cluster  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import check, failures  # noqa: E402

MOUNT = "/mnt/iotrace-test"
NPROCS = 4
# mpiio_mix's calls per rank (tests/mpi/mpiio_mix.c).
ONCE = ("close get_size iread_all iread_at iwrite_at iwrite_at_all open read read_all "
        "read_all_begin read_all_end read_at read_at_all read_ordered set_atomicity sync write "
        "write_all write_at write_at_all write_at_all_begin write_at_all_end write_at_c "
        "write_ordered write_shared").split()
PER_RANK = {f"MPI_File_{f}": 1 for f in ONCE}
PER_RANK.update({"MPI_File_seek": 5, "MPI_File_seek_shared": 3, "MPI_File_set_view": 2,
                 "MPI_Test": 1, "MPI_Wait": 1, "MPI_Waitall": 1, "MPI_Waitany": 1})
VOLUMES = [v for v in (("replicate", 2), ("disperse", 3)) if v[0] in os.environ.get("IOTRACE_CLUSTER_VOLUMES", "replicate disperse").split()]
DISK_RW = ("read", "write", "readv", "writev")


def run_job(c, args, job, truth):
    env = dict(os.environ, IOTRACE_JOB_ID=job)
    r = c.run("mpiexec", "-n", str(NPROCS), "sh", "-c", cluster.RANK_WRAPPER, truth,
              args.app, MOUNT, env=env, timeout=300)
    print(r.stdout.strip())


def check_job(c, job, truth, storage_hosts, volume):
    j = c.wait_settled(job, NPROCS)
    events = [e for e in c.events(job) if e["job"] == job]
    placed = cluster.placed_ranks(truth)
    hosts = collections.Counter(h for h, _ in placed.values())
    print(f"{job}: ranks placed {dict(sorted(placed.items()))}; stored {j}")
    check(sorted(placed) == list(range(NPROCS)), f"ranks that ran: {sorted(placed)}")
    check(hosts == {"compute1": 2, "compute2": 2}, f"ranks per host {dict(hosts)}, want 2 and 2")

    calls = [e for e in events if e["kind"] == "mpiio"]
    for e in calls:
        host, pid = placed.get(e["mpi_rank"], (None, None))
        if not check(e["node"] == host and e["pid"] == pid,
                     f"rank {e['mpi_rank']}'s {e['func']} stored as node {e['node']} pid {e['pid']}, "
                     f"ran on {host} as {pid}"):
            break
    per_rank = cluster.per_rank_calls(events, job)
    bad = []
    for rank in range(NPROCS):
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
    # Collective calls are matched as a group (the aggregators' I/O); the
    # independent ones on their own. A read a compute host's kernel answers from its page cache makes no
    # request: no disk operation can carry its CallID. On the disperse volume
    # GlusterFS's FUSE client (10.3) now and then leaves the file that host
    # created cached despite direct-io-mode=enable (its POSIX reads take a few
    # microseconds): independent reads on that host are named and counted,
    # any other call without a disk operation fails.
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
    if volume == "disperse":
        check(len(cached) == len(alone) == st["unmatched_calls"],
              f"unmatched_calls {st['unmatched_calls']}, {len(cached)} of them independent reads on "
              f"{creator}, which created the file")
    else:
        check(st["unmatched_calls"] == 0, f"unmatched_calls {st['unmatched_calls']}")
    check(st["unmatched_disk_ops"] == 0, f"unmatched_disk_ops {st['unmatched_disk_ops']}")
    check(st["dropped_events"] == 0, f"dropped_events {st['dropped_events']}")


def main():
    args = cluster.parse_args()
    cluster.skip_unless_possible()
    for volume, nstorage in VOLUMES:
        truth = tempfile.mkdtemp(prefix="iotrace-ranks-")
        os.chmod(truth, 0o777)
        storage = [f"storage{i}" for i in range(1, nstorage + 1)]
        try:
            with cluster.Cluster(args, "--volume", volume, "--storage", str(nstorage),
                                 "--mount", MOUNT) as c:
                job = f"attribution-{volume}"
                run_job(c, args, job, truth)
                check_job(c, job, truth, storage, volume)
        finally:
            shutil.rmtree(truth, ignore_errors=True)
    return cluster.finish(failures)


if __name__ == "__main__":
    sys.exit(main())
