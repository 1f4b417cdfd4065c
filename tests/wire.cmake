# Wire library: round trips, delta coding and every kind of corruption.
add_executable(test_wire ${IOTRACE_TEST_DIR}/unit/test_wire.c)
# zlib's own crc32() is the test's oracle for the library's CRC-32.
target_link_libraries(test_wire PRIVATE iotrace-wire PkgConfig::CMOCKA PkgConfig::ZLIB)
add_test(NAME wire.unit COMMAND test_wire)
