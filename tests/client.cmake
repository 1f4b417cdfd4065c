# libiotrace-client: wrapper table, POSIX wrappers and fork, end to end under
# real mpiexec with a real agent and collector, and transparency.
add_executable(mpiio_mix ${IOTRACE_TEST_DIR}/mpi/mpiio_mix.c)
target_link_libraries(mpiio_mix PRIVATE MPI::MPI_C)
add_executable(posix_mix ${IOTRACE_TEST_DIR}/posix/posix_mix.c)
add_executable(posix_burst ${IOTRACE_TEST_DIR}/posix/burst.c)
add_executable(fd_abuse ${IOTRACE_TEST_DIR}/posix/fd_abuse.c)
add_executable(aio_mix ${IOTRACE_TEST_DIR}/mpi/aio_mix.c)
target_link_libraries(aio_mix PRIVATE MPI::MPI_C Threads::Threads)
add_executable(steady_io ${IOTRACE_TEST_DIR}/mpi/steady_io.c)
target_link_libraries(steady_io PRIVATE MPI::MPI_C)
add_executable(thread_writes ${IOTRACE_TEST_DIR}/mpi/thread_writes.c)
target_link_libraries(thread_writes PRIVATE MPI::MPI_C Threads::Threads)
add_executable(resized_view ${IOTRACE_TEST_DIR}/mpi/resized_view.c)
target_link_libraries(resized_view PRIVATE MPI::MPI_C)
add_executable(open_abort ${IOTRACE_TEST_DIR}/mpi/open_abort.c)
target_link_libraries(open_abort PRIVATE MPI::MPI_C)
add_executable(self_coll ${IOTRACE_TEST_DIR}/mpi/self_coll.c)
target_link_libraries(self_coll PRIVATE MPI::MPI_C)
add_executable(queries ${IOTRACE_TEST_DIR}/mpi/queries.c)
target_link_libraries(queries PRIVATE MPI::MPI_C)
add_executable(nb_coll ${IOTRACE_TEST_DIR}/mpi/nb_coll.c)
target_link_libraries(nb_coll PRIVATE MPI::MPI_C)

set(IOTRACE_IT_ARGS
  --collector=$<TARGET_FILE:iotrace-collector>
  --agent=$<TARGET_FILE:iotrace-agent>
  --export=$<TARGET_FILE:iotrace-export>
  --client=$<TARGET_FILE:iotrace-client>
  --mpiexec=${MPIEXEC_PROG}
  --app=$<TARGET_FILE:mpiio_mix>
  --posix-app=$<TARGET_FILE:posix_mix>
  --burst-app=$<TARGET_FILE:posix_burst>
  --preload-prefix=${IOTRACE_PRELOAD_PREFIX})

find_path(IOTRACE_MPIO_DIR mpio.h HINTS ${MPI_C_INCLUDE_DIRS} REQUIRED)
add_test(NAME client.wrapper_table
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_table.py
          ${PROJECT_SOURCE_DIR}/clientlib/mpiio_functions.tsv $<TARGET_FILE:iotrace-client>
          ${IOTRACE_MPIO_DIR}/mpio.h ${IOTRACE_MPIO_DIR}/mpi_proto.h)
add_test(NAME client.mpi_trace_end_to_end
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_mpi_trace.py ${IOTRACE_IT_ARGS})
add_test(NAME client.job_from_mpi_init
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_job_from_init.py ${IOTRACE_IT_ARGS})
add_test(NAME client.posix_and_fork
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_posix.py ${IOTRACE_IT_ARGS})
add_test(NAME client.transparency
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_transparency.py ${IOTRACE_IT_ARGS})
add_test(NAME client.aio
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_aio.py ${IOTRACE_IT_ARGS}
          --aio-app=$<TARGET_FILE:aio_mix>)
add_test(NAME client.inline_send
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_inline_send.py ${IOTRACE_IT_ARGS}
          --thread-app=$<TARGET_FILE:thread_writes>)
add_test(NAME client.agent_killed
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_agent_kill.py ${IOTRACE_IT_ARGS}
          --steady-app=$<TARGET_FILE:steady_io>)
add_test(NAME client.resized_view
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_resized_view.py ${IOTRACE_IT_ARGS}
          --resized-app=$<TARGET_FILE:resized_view>)
add_test(NAME client.mpi_abort
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_open_abort.py ${IOTRACE_IT_ARGS}
          --abort-app=$<TARGET_FILE:open_abort>)
# Disk operations from a registry-reading brick (tests/export.cmake).
add_test(NAME client.self_collectives
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_self_collectives.py ${IOTRACE_IT_ARGS}
          --self-app=$<TARGET_FILE:self_coll> --brick=$<TARGET_FILE:registry_brick>)
add_test(NAME client.paths
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_paths.py ${IOTRACE_IT_ARGS})
add_test(NAME client.nb_collectives
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_nb_coll.py ${IOTRACE_IT_ARGS}
          --nb-app=$<TARGET_FILE:nb_coll>)
# The drop box with another user's files in it (root: acts as nobody).
add_test(NAME client.dropbox
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_dropbox.py ${IOTRACE_IT_ARGS})
# Another user's socket at the agent's endpoint gets nothing (root: acts as nobody).
add_test(NAME client.squatted_endpoint
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_squat.py ${IOTRACE_IT_ARGS})
set_tests_properties(client.squatted_endpoint PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
# Programs that close or overwrite every descriptor, and absent or stopped agents.
add_test(NAME client.descriptors
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_descriptors.py ${IOTRACE_IT_ARGS}
          --fd-abuse=$<TARGET_FILE:fd_abuse>)
# A sender that gets no core: full buffers handed over whole (IOTRACE_OVERFLOW_MB).
add_test(NAME client.overflow
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_overflow.py ${IOTRACE_IT_ARGS})
set_tests_properties(client.mpi_trace_end_to_end client.job_from_mpi_init client.posix_and_fork client.transparency
  client.descriptors client.overflow client.aio client.inline_send client.agent_killed client.resized_view client.mpi_abort client.self_collectives client.paths client.dropbox
  client.nb_collectives PROPERTIES TIMEOUT 300 RUN_SERIAL TRUE)
set_tests_properties(client.dropbox PROPERTIES SKIP_RETURN_CODE 77)

# Benchmarks (not tests), run by the scripts in tests/bench/ (docs/performance.md).
add_executable(bench_client ${IOTRACE_TEST_DIR}/bench/bench_client.c)
target_link_libraries(bench_client PRIVATE MPI::MPI_C)
add_executable(bench_ior ${IOTRACE_TEST_DIR}/bench/bench_ior.c)
target_link_libraries(bench_ior PRIVATE MPI::MPI_C)
add_executable(bench_clock ${IOTRACE_TEST_DIR}/bench/bench_clock.c)

# Next to another tool: a Darshan-like interposer, built for this test only.
add_library(fake_darshan SHARED ${IOTRACE_TEST_DIR}/tools/fake_darshan.c)
target_link_libraries(fake_darshan PRIVATE MPI::MPI_C ${CMAKE_DL_LIBS})
target_compile_options(fake_darshan PRIVATE -U_FORTIFY_SOURCE)
# The same, wrapping the MPI_File_get_* queries too, as Recorder does.
add_library(fake_recorder SHARED ${IOTRACE_TEST_DIR}/tools/fake_darshan.c)
target_link_libraries(fake_recorder PRIVATE MPI::MPI_C ${CMAKE_DL_LIBS})
target_compile_options(fake_recorder PRIVATE -U_FORTIFY_SOURCE)
target_compile_definitions(fake_recorder PRIVATE FAKE_WRAP_QUERIES)
add_test(NAME client.other_tool
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_other_tool.py ${IOTRACE_IT_ARGS}
          --fake-tool=$<TARGET_FILE:fake_darshan> --fake-recorder=$<TARGET_FILE:fake_recorder>
          --queries-app=$<TARGET_FILE:queries>)
set_tests_properties(client.other_tool PROPERTIES TIMEOUT 300 RUN_SERIAL TRUE)
