# The collector: its store and duplicate table as unit tests, and the real
# iotrace-collector and iotrace-export end to end over ZeroMQ on loopback,
# driven by a small protocol client (tests/unit/collector_client.c).
add_executable(test_store ${IOTRACE_TEST_DIR}/unit/test_store.c)
target_link_libraries(test_store PRIVATE iotrace-store PkgConfig::CMOCKA)
add_test(NAME collector.store COMMAND test_store)

add_executable(test_collector_dedup ${IOTRACE_TEST_DIR}/unit/test_collector_dedup.c)
target_link_libraries(test_collector_dedup PRIVATE iotrace-dedup PkgConfig::CMOCKA)
add_test(NAME collector.dedup COMMAND test_collector_dedup)

add_executable(test_clockmap ${IOTRACE_TEST_DIR}/unit/test_clockmap.c)
target_link_libraries(test_clockmap PRIVATE iotrace-events PkgConfig::CMOCKA)
add_test(NAME collector.clockmap COMMAND test_clockmap)

add_executable(collector_client ${IOTRACE_TEST_DIR}/unit/collector_client.c)
target_link_libraries(collector_client PRIVATE iotrace-wire iotrace-common PkgConfig::ZMQ)

add_test(NAME collector.end_to_end
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/collector_test.py
          $<TARGET_FILE:iotrace-collector> $<TARGET_FILE:iotrace-export>
          $<TARGET_FILE:collector_client>)
set_tests_properties(collector.end_to_end PROPERTIES TIMEOUT 180 LABELS collector)
set_tests_properties(collector.store collector.dedup collector.clockmap PROPERTIES LABELS collector)

# The HTTP API's parsing and routing, without a server, against the live
# analysis of the fuzzer's store (tests/fuzz/http-store.iots).
add_executable(test_http_api ${IOTRACE_TEST_DIR}/unit/test_http_api.c
               ${IOTRACE_TEST_DIR}/unit/live_fixture.c)
target_compile_definitions(test_http_api PRIVATE
  HTTP_STORE="${IOTRACE_TEST_DIR}/fuzz/http-store.iots")
target_link_libraries(test_http_api PRIVATE iotrace-daemon PkgConfig::CMOCKA)
add_test(NAME collector.http_api COMMAND test_http_api)
set_tests_properties(collector.http_api PROPERTIES LABELS collector TIMEOUT 60)

# The live timeline against the export of the same store: every MPI-IO
# call with the offset, bytes, file and rank --jsonl gives it
# (tests/fuzz/v2-store.iots and the .jsonl beside it).
add_executable(test_live_offsets ${IOTRACE_TEST_DIR}/unit/test_live_offsets.c
               ${IOTRACE_TEST_DIR}/unit/live_fixture.c)
target_compile_definitions(test_live_offsets PRIVATE
  V2_STORE="${IOTRACE_TEST_DIR}/fuzz/v2-store.iots"
  V2_JSONL="${IOTRACE_TEST_DIR}/fuzz/v2-store.jsonl")
target_link_libraries(test_live_offsets PRIVATE iotrace-daemon PkgConfig::CMOCKA)
add_test(NAME collector.live_offsets COMMAND test_live_offsets)
set_tests_properties(collector.live_offsets PROPERTIES LABELS collector TIMEOUT 60)

# The HTTP server's access control (basic authentication, HTTPS) and its
# option errors, against the real collector.
add_test(NAME collector.http_access
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/http_test.py $<TARGET_FILE:iotrace-collector>)
set_tests_properties(collector.http_access PROPERTIES LABELS collector TIMEOUT 120)

# A full disk under the real collector, agent and producer: the store on a
# small tmpfs the test mounts (root; skipped where mounting is not allowed).
add_test(NAME collector.disk_full
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/disk_full_test.py
          $<TARGET_FILE:iotrace-collector> $<TARGET_FILE:iotrace-agent>
          $<TARGET_FILE:iotrace-producer> $<TARGET_FILE:iotrace-export>)
set_tests_properties(collector.disk_full PROPERTIES LABELS collector TIMEOUT 180
                     SKIP_RETURN_CODE 77)

# Batches lost between a producer and the store (handed over, never stored)
# are found from the running total every batch carries and counted.
add_test(NAME collector.lost_in_transit
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/lost_test.py
          $<TARGET_FILE:iotrace-collector> $<TARGET_FILE:iotrace-agent>
          $<TARGET_FILE:iotrace-producer> $<TARGET_FILE:iotrace-export>)
set_tests_properties(collector.lost_in_transit PROPERTIES LABELS collector TIMEOUT 120)

# CURVE between agents and the collector: keys, the allow-list, refusals.
add_test(NAME collector.curve
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/curve_test.py
          $<TARGET_FILE:iotrace-collector> $<TARGET_FILE:iotrace-agent>
          $<TARGET_FILE:iotrace-producer> $<TARGET_FILE:iotrace-export>)
set_tests_properties(collector.curve PROPERTIES LABELS collector TIMEOUT 120)

# What a hostile local user cannot make the collector believe: clock
# samples through the agent's socket, another node's label, a HELLO as a
# node its key is not bound to, a changed via or sender, a loopback-looking
# name (tests/trust_test.py, driven as nobody).
add_test(NAME collector.trust
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/trust_test.py
          $<TARGET_FILE:iotrace-collector> $<TARGET_FILE:iotrace-agent>
          $<TARGET_FILE:iotrace-producer> $<TARGET_FILE:iotrace-export>
          $<TARGET_FILE:collector_client>)
set_tests_properties(collector.trust PROPERTIES LABELS collector TIMEOUT 240
                     ENVIRONMENT "LSAN_OPTIONS=suppressions=${IOTRACE_TEST_DIR}/tools/lsan.supp")

# Fault injection into the store's system calls, under the real collector,
# agent and producer: tests/tools/faultfs.c, preloaded (built for tests
# only; the collector has no hook of its own).
add_library(iotrace-faultfs SHARED ${IOTRACE_TEST_DIR}/tools/faultfs.c)
target_link_libraries(iotrace-faultfs PRIVATE ${CMAKE_DL_LIBS} Threads::Threads)
add_test(NAME collector.store_faults
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/store_faults_test.py
          $<TARGET_FILE:iotrace-collector> $<TARGET_FILE:iotrace-agent>
          $<TARGET_FILE:iotrace-producer> $<TARGET_FILE:iotrace-export>
          "${IOTRACE_PRELOAD_PREFIX}$<TARGET_FILE:iotrace-faultfs>"
          $<TARGET_FILE:collector_client>)
set_tests_properties(collector.store_faults PROPERTIES LABELS collector TIMEOUT 180
  ENVIRONMENT "LSAN_OPTIONS=suppressions=${IOTRACE_TEST_DIR}/tools/lsan.supp")

# The store knows what it should hold: copies of a store of user nobody's
# events cut at the tail, missing a segment or with one bit flipped are
# exported as far as they go, the loss said and exit 3; the collector starts
# on the flipped one.
add_test(NAME collector.store_integrity
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/store_integrity_test.py
          $<TARGET_FILE:iotrace-collector> $<TARGET_FILE:iotrace-agent>
          $<TARGET_FILE:iotrace-producer> $<TARGET_FILE:iotrace-export>)
set_tests_properties(collector.store_integrity PROPERTIES LABELS collector TIMEOUT 180
  SKIP_RETURN_CODE 77 ENVIRONMENT "LSAN_OPTIONS=suppressions=${IOTRACE_TEST_DIR}/tools/lsan.supp")

# The live analysis waits while every core is busy (--analysis-yield) and
# catches up afterwards; with --analysis-yield 0 it keeps up under the same
# load.
add_test(NAME collector.analysis_yield
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/yield_test.py
          $<TARGET_FILE:iotrace-collector> $<TARGET_FILE:iotrace-agent>
          $<TARGET_FILE:iotrace-producer>)
set_tests_properties(collector.analysis_yield PROPERTIES LABELS collector TIMEOUT 180
                     SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)

# A job forgotten after --keep gets no live view or statistics back from
# events the merge releases later (tests/forget_test.py).
add_test(NAME collector.forget
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/forget_test.py
          $<TARGET_FILE:iotrace-collector> $<TARGET_FILE:iotrace-agent>
          $<TARGET_FILE:iotrace-producer>)
set_tests_properties(collector.forget PROPERTIES LABELS collector TIMEOUT 120)

# The dashboard live by default with every core busy (a busy loop per core
# for the whole test): headless Chromium waits on the page of a job not
# known yet, follows the running job within 2 s of its stream while
# fetching only what changed, and shows the banner of an analysis behind
# the store (--analysis-yield) that names the option.
# What it measures is the page's lag under load: in the plain build only
# (the sanitizer build's live code runs under gluster.live_dashboard).
if(NOT IOTRACE_SANITIZE)
  add_test(NAME collector.dashboard
    COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/dashboard_test.py
            $<TARGET_FILE:iotrace-collector> $<TARGET_FILE:iotrace-agent>
            $<TARGET_FILE:iotrace-producer>)
  set_tests_properties(collector.dashboard PROPERTIES LABELS collector TIMEOUT 300
                       RUN_SERIAL TRUE)
  # Two HTTP users, an admin and one restricted to nobody's uid: the API and
  # the page in headless Chromium show each only their jobs.
  add_test(NAME collector.dashboard_users
    COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/dashboard_users_test.py
            $<TARGET_FILE:iotrace-collector> $<TARGET_FILE:iotrace-agent>
            $<TARGET_FILE:iotrace-producer> $<TARGET_FILE:server_api_demo>)
  set_tests_properties(collector.dashboard_users PROPERTIES LABELS collector TIMEOUT 300
                       SKIP_RETURN_CODE 77)
endif()

# The HTTP server against a hostile local user (user nobody, by setpriv):
# 200 clients that leave mid-download (bounded iotrace-export children,
# none outliving its client), and 200 connections that send a byte a second
# while root's requests are answered (tests/http_limits_test.py).
foreach(scenario downloads slow paths)
  # The slow clients' scenario is one of time (40 s of a byte a second) in
  # the plain build only: the sanitizer build runs the same connection
  # code in the other two, and fuzz_http its parser.
  if(IOTRACE_SANITIZE AND scenario STREQUAL "slow")
    continue()
  endif()
  add_test(NAME collector.http_${scenario}
    COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/http_limits_test.py ${scenario}
            $<TARGET_FILE:iotrace-collector> $<TARGET_FILE:iotrace-agent>
            $<TARGET_FILE:iotrace-producer> $<TARGET_FILE:iotrace-export>)
  set_tests_properties(collector.http_${scenario} PROPERTIES LABELS collector TIMEOUT 180)
endforeach()
