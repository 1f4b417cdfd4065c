# iotrace-replay end to end onto a local directory: traced jobs replayed
# under real mpiexec, the replay traced too, with a real agent and collector
# (tests/integration/test_replay.py).
if(NOT TARGET known_io) # built by gluster.cmake when the translators are
  add_executable(known_io ${IOTRACE_TEST_DIR}/mpi/known_io.c)
  target_link_libraries(known_io PRIVATE MPI::MPI_C)
endif()
add_test(NAME replay.local
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_replay.py ${IOTRACE_IT_ARGS}
          --replay=$<TARGET_FILE:iotrace-replay> --known-app=$<TARGET_FILE:known_io>
          --producer=$<TARGET_FILE:iotrace-producer>)
set_tests_properties(replay.local PROPERTIES TIMEOUT 300 RUN_SERIAL TRUE)

# From a distribute GlusterFS volume onto a replica and a disperse one
# (bricks on fixed ports: run alone, like the other gluster.* tests).
if(TARGET xlator-iotrace-client)
  iotrace_gluster_test(replay.gluster_volumes test_replay_gluster.py 600
                       --replay=$<TARGET_FILE:iotrace-replay> --known-app=$<TARGET_FILE:known_io>)
endif()
