# Wire library: round trips, delta coding and every kind of corruption.
add_executable(test_wire ${IOTRACE_TEST_DIR}/unit/test_wire.c)
target_link_libraries(test_wire PRIVATE iotrace-wire PkgConfig::CMOCKA)
add_test(NAME wire.unit COMMAND test_wire)
