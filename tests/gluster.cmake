# CallIDs through GlusterFS: real bricks and FUSE mounts (root, /dev/fuse),
# real mpiexec, agent and collector.
if(TARGET xlator-iotrace-client)
  add_test(NAME gluster.callids_reach_bricks
    COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/test_gluster.py ${IOTRACE_IT_ARGS}
            --volume-sh=${PROJECT_SOURCE_DIR}/deploy/gluster/volume.sh
            --xlator-dir=$<TARGET_FILE_DIR:xlator-iotrace-client>)
  set_tests_properties(gluster.callids_reach_bricks PROPERTIES
    TIMEOUT 600 RUN_SERIAL TRUE SKIP_RETURN_CODE 77)
endif()
