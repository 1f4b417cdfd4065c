# (After client.cmake, which sets IOTRACE_IT_ARGS.)
# iotrace-export --chrome: a real traced MPI job (mpiexec, the client library
# preloaded, a real agent and collector) whose MPI-IO calls a registry-reading
# storage server without a file system (tests/server/registry_brick.c) serves
# with tagged disk operations; the trace file checked against a trace-event
# schema, --jsonl and --stats, opened in headless Chromium; and its memory on
# a small and a ten times larger store of iotrace-producer's.
add_executable(registry_brick ${IOTRACE_TEST_DIR}/server/registry_brick.c)
target_link_libraries(registry_brick PRIVATE iotrace-server-lib iotrace-registry Threads::Threads)
# In the plain build only: under AddressSanitizer its 40 s are mostly the
# browser's, and the exporter's code it runs is run there by export.text
# and the fuzzers.
if(NOT IOTRACE_SANITIZE)
  add_test(NAME export.chrome
    COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_chrome_export.py
            ${IOTRACE_IT_ARGS} --loop-app=$<TARGET_FILE:mpiio_loop>
            --brick=$<TARGET_FILE:registry_brick> --producer=$<TARGET_FILE:iotrace-producer>)
  set_tests_properties(export.chrome PROPERTIES TIMEOUT 600 RUN_SERIAL TRUE LABELS export)
endif()

# The exporters' own JSON, CSV and integer writing against jansson and
# printf, the sorter against qsort (in memory and spilled), the progress line.
add_executable(test_export_text ${IOTRACE_TEST_DIR}/unit/test_export_text.c)
target_compile_definitions(test_export_text PRIVATE
  V2_STORE="${IOTRACE_TEST_DIR}/fuzz/v2-store.iots"
  HTTP_STORE="${IOTRACE_TEST_DIR}/fuzz/http-store.iots")
target_link_libraries(test_export_text PRIVATE iotrace-exportlib PkgConfig::CMOCKA)
add_test(NAME export.text COMMAND test_export_text)
set_tests_properties(export.text PROPERTIES LABELS export TIMEOUT 120)
