# Tests on real GlusterFS volumes: glusterfsd bricks and FUSE mounts (root,
# /dev/fuse), real mpiexec, agent and collector.  They use fixed brick ports,
# so they run one at a time.
function(iotrace_gluster_test name script timeout)
  add_test(NAME ${name}
    COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/${script} ${IOTRACE_IT_ARGS}
            --volume-sh=${PROJECT_SOURCE_DIR}/deploy/gluster/volume.sh
            --xlator-dir=$<TARGET_FILE_DIR:xlator-iotrace-client> ${ARGN})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${timeout} RUN_SERIAL TRUE SKIP_RETURN_CODE 77)
endfunction()

if(TARGET xlator-iotrace-client)
  # CallIDs reach the bricks on distribute, replica and disperse volumes;
  # every kind of operation the translators record.
  add_executable(fops_tagged ${IOTRACE_TEST_DIR}/server/fops_tagged.c)
  target_link_libraries(fops_tagged PRIVATE iotrace-registry)
  iotrace_gluster_test(gluster.callids_reach_bricks test_gluster.py 600
                       --fuse-ops=$<TARGET_FILE:bench_fuse_ops>
                       --fops-tagged=$<TARGET_FILE:fops_tagged>
                       --nb-app=$<TARGET_FILE:nb_coll>)

  # A compute node and a storage node with clocks seconds apart and drifting
  # (libfaketime): alignment, matching and statistics on a real volume.
  add_executable(known_io ${IOTRACE_TEST_DIR}/mpi/known_io.c)
  target_link_libraries(known_io PRIVATE MPI::MPI_C)
  iotrace_gluster_test(gluster.clock_aligned test_gluster_clock.py 300
                       --known-app=$<TARGET_FILE:known_io>)

  # The live collector over HTTP while a traced job runs on a volume: API,
  # statistics equal to the export's, a real Prometheus, headless Chromium.
  iotrace_gluster_test(gluster.live_dashboard test_live.py 600)

  # The exports as an analyst loads them (pandas): JSON Lines and CSV against
  # their schema and against --stats.
  iotrace_gluster_test(gluster.analyst_exports test_analyst.py 300)
endif()
