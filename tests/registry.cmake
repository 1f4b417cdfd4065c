# The CallID registry shared by libiotrace-client and the storage hooks.
add_executable(test_registry ${IOTRACE_TEST_DIR}/unit/test_registry.c)
target_link_libraries(test_registry PRIVATE iotrace-registry PkgConfig::CMOCKA Threads::Threads)
add_test(NAME registry.unit COMMAND test_registry)
