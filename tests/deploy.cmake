# The install: relocatable, units verified and hardened, ExecStart run as the
# service user (tests/install_test.py).
add_test(NAME deploy.install
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/install_test.py ${CMAKE_BINARY_DIR}
          $<TARGET_FILE:iotrace-producer>)
set_tests_properties(deploy.install PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)

# --help, --man, docs/ and the client library's environment variables agree.
add_test(NAME docs.consistency
  COMMAND Python3::Interpreter ${PROJECT_SOURCE_DIR}/deploy/man/docs_sync.py check
          ${PROJECT_SOURCE_DIR} ${CMAKE_BINARY_DIR})
set_tests_properties(docs.consistency PROPERTIES ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")

# The Debian packages: built (their own build tree, configured for /usr),
# installed into a clean root with dpkg, removed.  Once per suite: the plain
# build runs it.
if(NOT IOTRACE_SANITIZE AND NOT IOTRACE_FUZZ)
  add_test(NAME deploy.packages
    COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/packages_test.py ${PROJECT_SOURCE_DIR}
            ${CMAKE_BINARY_DIR}/packages-test)
  set_tests_properties(deploy.packages PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE
    FIXTURES_SETUP debs)
  # Those packages installed into a Debian root made with debootstrap and
  # booted with systemd-nspawn: the units under a real systemd.
  add_test(NAME deploy.boot
    COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/boot_test.py ${CMAKE_BINARY_DIR}/packages-test
            ${CMAKE_BINARY_DIR}/boot-test)
  set_tests_properties(deploy.boot PROPERTIES TIMEOUT 1500 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE
    FIXTURES_REQUIRED debs)
endif()
