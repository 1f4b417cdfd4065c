# CallIDs through GlusterFS: real bricks and FUSE mounts (root, /dev/fuse),
# real mpiexec, agent and collector.
if(TARGET xlator-iotrace-client)
  add_test(NAME gluster.callids_reach_bricks
    COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_gluster.py ${IOTRACE_IT_ARGS}
            --volume-sh=${PROJECT_SOURCE_DIR}/deploy/gluster/volume.sh
            --xlator-dir=$<TARGET_FILE_DIR:xlator-iotrace-client>
            --fuse-ops=$<TARGET_FILE:bench_fuse_ops>)
  set_tests_properties(gluster.callids_reach_bricks PROPERTIES
    TIMEOUT 600 RUN_SERIAL TRUE SKIP_RETURN_CODE 77)

  # A compute node and a storage node with clocks seconds apart and drifting
  # (libfaketime): alignment, matching and statistics on a real volume.
  add_executable(known_io ${IOTRACE_TEST_DIR}/mpi/known_io.c)
  target_link_libraries(known_io PRIVATE MPI::MPI_C)
  add_test(NAME gluster.clock_aligned
    COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_gluster_clock.py ${IOTRACE_IT_ARGS}
            --volume-sh=${PROJECT_SOURCE_DIR}/deploy/gluster/volume.sh
            --xlator-dir=$<TARGET_FILE_DIR:xlator-iotrace-client>
            --known-app=$<TARGET_FILE:known_io>)
  set_tests_properties(gluster.clock_aligned PROPERTIES
    TIMEOUT 300 RUN_SERIAL TRUE SKIP_RETURN_CODE 77)
endif()

# The live collector over HTTP while a traced job runs on a volume: API,
# statistics equal to the export's, a real Prometheus, headless Chromium.
if(TARGET xlator-iotrace-client)
  add_test(NAME gluster.live_dashboard
    COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_live.py ${IOTRACE_IT_ARGS}
            --volume-sh=${PROJECT_SOURCE_DIR}/deploy/gluster/volume.sh
            --xlator-dir=$<TARGET_FILE_DIR:xlator-iotrace-client>)
  set_tests_properties(gluster.live_dashboard PROPERTIES
    TIMEOUT 600 RUN_SERIAL TRUE SKIP_RETURN_CODE 77)
endif()
