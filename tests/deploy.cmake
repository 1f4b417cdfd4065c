# The install: relocatable, units verified and hardened, ExecStart run as the
# service user (tests/install_test.py).
add_test(NAME deploy.install
  COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/install_test.py ${CMAKE_BINARY_DIR}
          $<TARGET_FILE:iotrace-producer>)
set_tests_properties(deploy.install PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
