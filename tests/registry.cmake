# The CallID registry shared by libiotrace-client and the storage hooks.
add_executable(test_registry ${IOTRACE_TEST_DIR}/unit/test_registry.c)
target_link_libraries(test_registry PRIVATE iotrace-registry PkgConfig::CMOCKA Threads::Threads)
add_test(NAME registry.unit COMMAND test_registry)

# Ranks and their per-user registry under real mpiexec: registries of
# another owner or writable by others refused, another user cannot truncate
# the registry of ranks in MPI-IO calls (root: it acts as nobody).
add_executable(mpiio_loop ${IOTRACE_TEST_DIR}/mpi/mpiio_loop.c)
target_link_libraries(mpiio_loop PRIVATE MPI::MPI_C)
add_executable(thread_calls ${IOTRACE_TEST_DIR}/mpi/thread_calls.c)
target_link_libraries(thread_calls PRIVATE MPI::MPI_C Threads::Threads)
add_test(NAME registry.ranks
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_registry.py ${IOTRACE_IT_ARGS}
          --loop-app=$<TARGET_FILE:mpiio_loop> --thread-app=$<TARGET_FILE:thread_calls>)
set_tests_properties(registry.ranks PROPERTIES TIMEOUT 300 RUN_SERIAL TRUE SKIP_RETURN_CODE 77)

# Ranks with their registry on a full tmpfs (a small one of the test's own,
# in a private mount namespace): a sparse registry refused, none made
# without room for its table, a reserved one used; no SIGBUS (root).
add_test(NAME registry.full_tmpfs
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_registry_full.py
          ${IOTRACE_IT_ARGS})
set_tests_properties(registry.full_tmpfs PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
