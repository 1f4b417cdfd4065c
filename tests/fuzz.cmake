# libFuzzer targets for what reads bytes from outside: the wire decoder, the
# store reader, the SLOG-2 reader, config files and the HTTP API's requests.
# Built only with -DIOTRACE_FUZZ=ON and clang (deploy/run-tests.sh makes
# such a build); each test runs its target
# for IOTRACE_FUZZ_SECONDS from the committed seeds (tests/fuzz/seeds/) and
# fails on any crash, sanitizer report, leak or timeout.  Longer runs:
# docs/testing.md.
if(IOTRACE_FUZZ)
  set(IOTRACE_FUZZ_SECONDS 20 CACHE STRING "Seconds each fuzz test runs")
  foreach(t wire store slog2 config http)
    add_executable(fuzz_${t} ${IOTRACE_TEST_DIR}/fuzz/fuzz_${t}.c)
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
  endforeach()
  target_link_libraries(fuzz_wire PRIVATE iotrace-wire)
  target_link_libraries(fuzz_store PRIVATE iotrace-store iotrace-common)
  target_link_libraries(fuzz_slog2 PRIVATE iotrace-slog2)
  target_link_libraries(fuzz_config PRIVATE iotrace-common)
  target_sources(fuzz_http PRIVATE ${IOTRACE_TEST_DIR}/unit/live_fixture.c)
  target_include_directories(fuzz_http PRIVATE ${IOTRACE_TEST_DIR}/unit)
  target_link_libraries(fuzz_http PRIVATE iotrace-daemon)
  target_compile_definitions(fuzz_http PRIVATE
    FUZZ_HTTP_STORE="${IOTRACE_TEST_DIR}/fuzz/http-store.iots")
  set(reference "${CMAKE_SOURCE_DIR}/../shared/reference/slog2") # as in slog2.cmake
  foreach(t wire store slog2 config http)
    set(extra "")
    if(t STREQUAL "slog2" AND EXISTS "${reference}")
      set(extra "${reference}") # files written by Argonne's slog2sdk, read only
    endif()
    add_test(NAME fuzz.${t}
             COMMAND sh ${IOTRACE_TEST_DIR}/fuzz/run-fuzzer.sh $<TARGET_FILE:fuzz_${t}>
                     ${IOTRACE_FUZZ_SECONDS} ${IOTRACE_TEST_DIR}/fuzz/seeds/${t} ${extra})
    set_tests_properties(fuzz.${t} PROPERTIES LABELS fuzz TIMEOUT 300)
  endforeach()
endif()
