# Tests on a cluster of network-namespace hosts (deploy/cluster.sh): a
# collector host, compute hosts with FUSE clients and ranks, storage hosts
# with bricks, an agent per host, TCP and CURVE across a bridge. Root,
# /dev/fuse; one cluster at a time (RUN_SERIAL). In the plain build only:
# what they check is the deployment (hosts, keys, clocks, faults), and the
# code they run has its sanitizer tests elsewhere.
if(TARGET xlator-iotrace-client AND NOT IOTRACE_SANITIZE)
  function(iotrace_cluster_test name script timeout)
    add_test(NAME ${name}
      COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/${script}
              --cluster-sh=${PROJECT_SOURCE_DIR}/deploy/cluster.sh --build=${PROJECT_BINARY_DIR}
              --app=$<TARGET_FILE:mpiio_mix> ${ARGN})
    set_tests_properties(${name} PROPERTIES TIMEOUT ${timeout} RUN_SERIAL TRUE SKIP_RETURN_CODE 77)
  endfunction()

  # mpiio_mix across 2 compute hosts on a replicate (2 storage hosts) and a
  # disperse (3) volume: every call once per rank with its host, every brick
  # read/write with the CallID of its call, nothing unmatched.
  iotrace_cluster_test(cluster.attribution test_cluster_attribution.py 400)

  # tcpdump on the bridge: the agent -> collector hop carries no job name,
  # file name, function or host name in clear; an agent with compute1's key
  # claiming compute2 is refused.
  iotrace_cluster_test(cluster.keys test_cluster_keys.py 300)

  # Hosts on clocks of their own (libfaketime: +3 s and 50 ppm, -2 s, +1.5 s,
  # -0.7 s): offsets against the truth, reads and writes inside their calls
  # after alignment, a +1 s step followed.
  iotrace_cluster_test(cluster.clocks test_cluster_clocks.py 400)

  # Slurm (slurmctld, slurmd, munge, iotrace's TaskProlog) across the
  # compute hosts: srun and sbatch jobs of user nobody stored under Slurm's
  # job.step ids with their name and user, attributed as above; an opted-out
  # job not stored; the dashboard in headless Chromium on the collector host.
  iotrace_cluster_test(cluster.slurm test_cluster_slurm.py 500)

  # Faults during a job of steady_io: the compute1 <-> collector path cut
  # for 60 s, the collector host stopped hard and started, its store full
  # for 30 s (every call stored once, nothing dropped); a storage host
  # crashed (the job goes on, the surviving brick has every later write); a
  # compute host crashed and started (its spool arrives, what died in the
  # ranks' memory is counted per rank).
  iotrace_cluster_test(cluster.faults test_cluster_faults.py 900)
endif()
