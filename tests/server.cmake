# libiotrace-server used the way a storage server links it.
add_executable(server_api_demo ${IOTRACE_TEST_DIR}/server/server_api_demo.c)
target_link_libraries(server_api_demo PRIVATE iotrace-server-lib Threads::Threads)
add_test(NAME server.api_end_to_end
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_server_api.py ${IOTRACE_IT_ARGS}
          --server-demo=$<TARGET_FILE:server_api_demo>)
set_tests_properties(server.api_end_to_end PROPERTIES TIMEOUT 120)
