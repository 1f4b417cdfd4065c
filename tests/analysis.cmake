# The analysis pipeline (collector/analysis*.c): merge, matcher, quantiles
# and statistics as unit tests, and iotrace-export --stats end to end
# against a store with a known workload (tests/stats_test.py).
add_executable(test_analysis ${IOTRACE_TEST_DIR}/unit/test_analysis.c)
target_link_libraries(test_analysis PRIVATE iotrace-analysis PkgConfig::CMOCKA)
add_test(NAME analysis.unit COMMAND test_analysis)
set_tests_properties(analysis.unit PROPERTIES LABELS analysis TIMEOUT 120)

# Events/s through merge, matching and statistics, and memory per call in
# flight (built, not run as a test; see docs/performance.md).  slog2.views
# uses it to write small stores of a given layout (-d -k).
add_executable(bench_analysis ${IOTRACE_TEST_DIR}/bench/bench_analysis.c)
target_link_libraries(bench_analysis PRIVATE iotrace-exportlib)

add_test(NAME analysis.stats_end_to_end
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/stats_test.py
          $<TARGET_FILE:iotrace-collector> $<TARGET_FILE:iotrace-export>
          $<TARGET_FILE:collector_client>)
set_tests_properties(analysis.stats_end_to_end PROPERTIES LABELS analysis TIMEOUT 120)
