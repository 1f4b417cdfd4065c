# The node agent: unit tests of its pending store, and integration tests
# that run the real iotrace-agent between the synthetic producer and a
# scriptable test collector (tests/tools/agent-test.sh).
add_executable(iotrace-producer ${IOTRACE_TEST_DIR}/tools/iotrace-producer.c)
target_link_libraries(iotrace-producer PRIVATE iotrace-wire iotrace-common iotrace-handover PkgConfig::ZMQ)

add_executable(test-agent-collector ${IOTRACE_TEST_DIR}/unit/test_agent_collector.c)
target_link_libraries(test-agent-collector PRIVATE iotrace-wire iotrace-common PkgConfig::ZMQ)

add_executable(test_agent_spool ${IOTRACE_TEST_DIR}/unit/test_agent_spool.c)
target_link_libraries(test_agent_spool PRIVATE iotrace-agent-core PkgConfig::CMOCKA)
add_test(NAME agent.spool COMMAND test_agent_spool)
add_executable(test_agent_ipclisten ${IOTRACE_TEST_DIR}/unit/test_agent_ipclisten.c)
target_link_libraries(test_agent_ipclisten PRIVATE iotrace-agent-core PkgConfig::CMOCKA)
add_test(NAME agent.ipclisten COMMAND test_agent_ipclisten)
set_tests_properties(agent.ipclisten PROPERTIES TIMEOUT 60 LABELS agent)

# A launcher's job from the sender's cgroup: only paths root makes count.
add_executable(test_launcher ${IOTRACE_TEST_DIR}/unit/test_launcher.c)
target_link_libraries(test_launcher PRIVATE iotrace-agent-core PkgConfig::CMOCKA)
add_test(NAME agent.launcher COMMAND test_launcher)
set_tests_properties(agent.launcher PROPERTIES LABELS agent)

foreach(case usage exactly_once slow_acks collector_restart collector_dies never_ack spool_kill
             garbage collector_junk collector_rejects huge flood backpressure clock_pong clock_silent)
  add_test(NAME agent.${case}
           COMMAND ${IOTRACE_TEST_DIR}/tools/agent-test.sh ${case}
                   $<TARGET_FILE:iotrace-agent> $<TARGET_FILE:iotrace-producer>
                   $<TARGET_FILE:test-agent-collector>)
  set_tests_properties(agent.${case} PROPERTIES TIMEOUT 120 LABELS agent
                       ENVIRONMENT "LSAN_OPTIONS=suppressions=${IOTRACE_TEST_DIR}/tools/lsan.supp")
endforeach()

# Not a test: `cmake --build . --target bench-transport` prints events/s.
add_custom_target(bench-transport
  COMMAND ${IOTRACE_TEST_DIR}/tools/bench-transport.sh
          --agent $<TARGET_FILE:iotrace-agent> --producer $<TARGET_FILE:iotrace-producer>
          --collector $<TARGET_FILE:test-agent-collector>
  DEPENDS iotrace-agent iotrace-producer test-agent-collector
  USES_TERMINAL)
if(TARGET iotrace-collector)
  add_test(NAME agent.real_collector
           COMMAND ${IOTRACE_TEST_DIR}/tools/agent-test.sh real_collector
                   $<TARGET_FILE:iotrace-agent> $<TARGET_FILE:iotrace-producer>
                   $<TARGET_FILE:iotrace-collector>)
  set_tests_properties(agent.real_collector PROPERTIES TIMEOUT 120 LABELS agent
                       ENVIRONMENT "LSAN_OPTIONS=suppressions=${IOTRACE_TEST_DIR}/tools/lsan.supp")
  # Clock alignment end to end: the agent and a producer under libfaketime,
  # 3 s ahead (and 1 % fast), the collector on the real clock.
  foreach(case shift drift)
    add_test(NAME clock.faketime_${case}
             COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/tools/clock-test.py ${case}
                     $<TARGET_FILE:iotrace-collector> $<TARGET_FILE:iotrace-agent>
                     $<TARGET_FILE:iotrace-producer> $<TARGET_FILE:iotrace-export>)
    set_tests_properties(clock.faketime_${case} PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77
                         LABELS "agent;clock"
                         ENVIRONMENT "LSAN_OPTIONS=suppressions=${IOTRACE_TEST_DIR}/tools/lsan.supp")
  endforeach()
  add_custom_target(bench-transport-collector
    COMMAND ${IOTRACE_TEST_DIR}/tools/bench-transport.sh
            --agent $<TARGET_FILE:iotrace-agent> --producer $<TARGET_FILE:iotrace-producer>
            --collector $<TARGET_FILE:iotrace-collector>
    DEPENDS iotrace-agent iotrace-producer iotrace-collector
    USES_TERMINAL)
endif()

# Ranks of another user than the agent's: the socket is open to all, every
# batch carries its sender's uid, a user cannot publish into another's job.
if(TARGET iotrace-collector)
  add_test(NAME agent.other_users
           COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/users_test.py
                   $<TARGET_FILE:iotrace-collector> $<TARGET_FILE:iotrace-agent>
                   $<TARGET_FILE:iotrace-producer> $<TARGET_FILE:iotrace-export>
                   $<TARGET_FILE:server_api_demo>)
  set_tests_properties(agent.other_users PROPERTIES TIMEOUT 120 LABELS agent SKIP_RETURN_CODE 77
                       ENVIRONMENT "LSAN_OPTIONS=suppressions=${IOTRACE_TEST_DIR}/tools/lsan.supp")
endif()

# The spool against a full disk (a 256 KiB tmpfs) and a damaged byte, the
# producers run as user nobody, the agent killed (-9): every event stored or
# counted.
if(TARGET iotrace-collector)
  foreach(case full_disk damaged)
    add_test(NAME agent.spool_${case}
             COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/spool_integrity_test.py ${case}
                     $<TARGET_FILE:iotrace-collector> $<TARGET_FILE:iotrace-agent>
                     $<TARGET_FILE:iotrace-producer> $<TARGET_FILE:iotrace-export>)
    set_tests_properties(agent.spool_${case} PROPERTIES TIMEOUT 300 LABELS agent SKIP_RETURN_CODE 77
                         ENVIRONMENT "LSAN_OPTIONS=suppressions=${IOTRACE_TEST_DIR}/tools/lsan.supp")
  endforeach()
endif()

# A local user attacking the agent, as that user: the others' batches still
# get through with the shipped defaults.
if(TARGET iotrace-collector)
  add_test(NAME agent.hostile_user
           COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/hostile_test.py
                   $<TARGET_FILE:iotrace-collector> $<TARGET_FILE:iotrace-agent>
                   $<TARGET_FILE:iotrace-producer> $<TARGET_FILE:iotrace-export>
                   $<TARGET_FILE:server_api_demo>)
  set_tests_properties(agent.hostile_user PROPERTIES TIMEOUT 300 LABELS agent SKIP_RETURN_CODE 77
                       ENVIRONMENT "LSAN_OPTIONS=suppressions=${IOTRACE_TEST_DIR}/tools/lsan.supp")
endif()

# The clock datagrams: MAC, lengths, the kernel's receive time, endpoints.
add_executable(test_clockudp ${IOTRACE_TEST_DIR}/unit/test_clockudp.c)
target_link_libraries(test_clockudp PRIVATE iotrace-clockudp PkgConfig::CMOCKA)
add_test(NAME agent.clockudp COMMAND test_clockudp)
set_tests_properties(agent.clockudp PROPERTIES TIMEOUT 60 LABELS agent)
