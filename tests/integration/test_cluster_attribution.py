#!/usr/bin/env python3
"""Attribution across hosts (deploy/cluster.sh, docs/cluster.md).

A cluster of namespace hosts: a collector host, 2 compute hosts, and storage
hosts holding a replicate volume (2 hosts) and then a disperse volume (3
hosts). mpiio_mix (independent, collective, split collective,
non-blocking and shared-pointer calls) runs as 4 ranks spread over the
compute hosts, by mpiexec through the hosts' launcher and by Slurm's srun
(job JOBID.0). Checks, per volume and job:


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
VOLUMES = [v for v in (("replicate", 2), ("disperse", 3)) if v[0] in os.environ.get("IOTRACE_CLUSTER_VOLUMES", "replicate disperse").split()]


def run_job(c, args, job, truth):
    env = dict(os.environ, IOTRACE_JOB_ID=job)
    r = c.run("mpiexec", "-n", str(NPROCS), "sh", "-c",
              cluster.RANK_WRAPPER, truth, args.app, MOUNT, env=env, timeout=300)
    print(r.stdout.strip())


def run_srun(c, args, truth):
    """The same program by Slurm: srun from compute1, 2 tasks per host; the
    job is Slurm's JOBID.0."""
    r = c.exec("compute1", "srun", "-N2", "-n", str(NPROCS),
               "--ntasks-per-node=2", "-J", "attribution-srun", "sh", "-c", cluster.RANK_WRAPPER,
               truth, args.app, MOUNT, timeout=300)
    print(r.stdout.strip())
    steps = cluster.slurm_steps(truth)
    check(len(steps) == 1, f"srun's ranks in Slurm jobs {steps}")
    job = ".".join(next(iter(steps)))
    return job


def main():
    args = cluster.parse_args()
    cluster.skip_unless_possible()
    for volume, nstorage in VOLUMES:
        truth, struth = tempfile.mkdtemp(prefix="iotrace-ranks-"), tempfile.mkdtemp(prefix="iotrace-ranks-")
        os.chmod(truth, 0o777)
        os.chmod(struth, 0o777)
        storage = [f"storage{i}" for i in range(1, nstorage + 1)]
        try:
            with cluster.Cluster(args, "--volume", volume, "--storage", str(nstorage),
                                 "--mount", MOUNT) as c:
                job = f"attribution-{volume}"
                run_job(c, args, job, truth)
                sjob = run_srun(c, args, struth)
                cluster.check_attribution(c, job, truth, storage)
                cluster.check_attribution(c, sjob, struth, storage)
        finally:
            shutil.rmtree(truth, ignore_errors=True)
            shutil.rmtree(struth, ignore_errors=True)
    return cluster.finish(failures)


if __name__ == "__main__":
    sys.exit(main())
