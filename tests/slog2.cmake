# SLOG-2 reader: the files Argonne's Java slog2sdk wrote, checked against
# their FACTS.md and slog2printrecur dumps, plus damaged copies of them.
set(IOTRACE_SLOG2_REFERENCE "${CMAKE_SOURCE_DIR}/../shared/reference/slog2" CACHE PATH
    "directory of reference SLOG-2 files written by slog2sdk")
add_executable(test_slog2 ${IOTRACE_TEST_DIR}/unit/test_slog2.c)
target_link_libraries(test_slog2 PRIVATE iotrace-slog2 PkgConfig::CMOCKA)
if(EXISTS "${IOTRACE_SLOG2_REFERENCE}/FACTS.md")
  add_test(NAME slog2.reader COMMAND test_slog2 ${IOTRACE_SLOG2_REFERENCE})
  add_test(NAME slog2.dump_cli
    COMMAND sh ${IOTRACE_TEST_DIR}/tools/slog2-dump-cli.sh $<TARGET_FILE:iotrace-export>
            ${IOTRACE_SLOG2_REFERENCE})
  set_tests_properties(slog2.reader slog2.dump_cli PROPERTIES LABELS slog2 TIMEOUT 600)
else()
  message(STATUS "SLOG-2 reference files not found in ${IOTRACE_SLOG2_REFERENCE}: "
                 "skipping the slog2 tests (set IOTRACE_SLOG2_REFERENCE)")
endif()

# SLOG-2 writer: round trips through the reader, multi-level trees, the
# memory bound, error paths, and the reference inputs re-created and
# compared with Java's files (skipped when the reference files are absent).
add_executable(test_slog2_write ${IOTRACE_TEST_DIR}/unit/test_slog2_write.c)
target_link_libraries(test_slog2_write PRIVATE iotrace-slog2 PkgConfig::CMOCKA)
add_test(NAME slog2.writer COMMAND test_slog2_write ${IOTRACE_SLOG2_REFERENCE})
set_tests_properties(slog2.writer PROPERTIES LABELS slog2 TIMEOUT 900)

# The exporter's categories: every one it can write, through the writer and
# the reader, each in a colour of its own and of its family's hues.
add_executable(test_slog2_export ${IOTRACE_TEST_DIR}/unit/test_slog2_export.c)
target_link_libraries(test_slog2_export PRIVATE iotrace-exportlib PkgConfig::CMOCKA m)
add_test(NAME slog2.colours COMMAND test_slog2_export)
set_tests_properties(slog2.colours PROPERTIES LABELS slog2 TIMEOUT 60)

# Writer throughput and peak memory (built, not run as a test; see
# docs/performance.md, "SLOG-2 writer").
add_executable(bench_slog2 ${IOTRACE_TEST_DIR}/bench/bench_slog2.c)
target_link_libraries(bench_slog2 PRIVATE iotrace-slog2)

# --slog2's line-ID maps as Jumpshot shows them (the first view: one row per
# rank and per server thread, grouped by node), on stores bench_analysis
# writes in two layouts.
add_test(NAME slog2.views
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_slog2_views.py
          --export=$<TARGET_FILE:iotrace-export> --bench-analysis=$<TARGET_FILE:bench_analysis>)
set_tests_properties(slog2.views PROPERTIES LABELS slog2 TIMEOUT 300)
