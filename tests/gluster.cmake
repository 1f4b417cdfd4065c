# Tests on real GlusterFS volumes: glusterfsd bricks and FUSE mounts (root,
# /dev/fuse), real mpiexec, agent and collector.  They use fixed brick ports,
# so they run one at a time.
function(iotrace_gluster_test name script timeout)
  add_test(NAME ${name}
    COMMAND Python3::Interpreter ${IOTRACE_TEST_DIR}/integration/${script} ${IOTRACE_IT_ARGS}
            --volume-sh=${PROJECT_SOURCE_DIR}/deploy/gluster/volume.sh
            --xlator-dir=$<TARGET_FILE_DIR:xlator-iotrace-client> ${ARGN})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${timeout} RUN_SERIAL TRUE SKIP_RETURN_CODE 77)
endfunction()

# Whose tags a brick believes (serverhooks/tag_trust.c, plain C).
add_executable(test_tag_trust ${IOTRACE_TEST_DIR}/unit/test_tag_trust.c
               ${PROJECT_SOURCE_DIR}/serverhooks/tag_trust.c)
target_include_directories(test_tag_trust PRIVATE ${PROJECT_SOURCE_DIR}/serverhooks)
target_link_libraries(test_tag_trust PRIVATE PkgConfig::CMOCKA)
add_test(NAME gluster.tag_trust COMMAND test_tag_trust)

if(TARGET xlator-iotrace-client)
  # CallIDs reach the bricks on distribute, replica and disperse volumes;
  # every kind of operation the translators record.
  add_executable(fops_tagged ${IOTRACE_TEST_DIR}/server/fops_tagged.c)
  target_link_libraries(fops_tagged PRIVATE iotrace-registry)
  iotrace_gluster_test(gluster.callids_reach_bricks test_gluster.py 600
                       --fuse-ops=$<TARGET_FILE:bench_fuse_ops>
                       --fops-tagged=$<TARGET_FILE:fops_tagged>
                       --nb-app=$<TARGET_FILE:nb_coll>)

  # User nobody runs a storage client of its own (libgfapi) whose translator
  # tags its writes with root's job and iotrace.uid=0: the bricks record them
  # as JOB~unverified, root's job keeps its own operations only.
  find_library(IOTRACE_GFAPI_LIBRARY gfapi)
  if(IOTRACE_GFAPI_LIBRARY)
    add_executable(gfapi_forge ${IOTRACE_TEST_DIR}/server/gfapi_forge.c)
    target_include_directories(gfapi_forge SYSTEM PRIVATE ${IOTRACE_GLUSTERFS_INCLUDE_DIR})
    target_link_libraries(gfapi_forge PRIVATE ${IOTRACE_GFAPI_LIBRARY})
    add_library(forge_tag MODULE ${IOTRACE_TEST_DIR}/server/forge_tag_xlator.c)
    set_target_properties(forge_tag PROPERTIES PREFIX "" C_EXTENSIONS ON
                          C_VISIBILITY_PRESET hidden)
    target_include_directories(forge_tag PRIVATE ${PROJECT_SOURCE_DIR}/serverhooks)
    target_include_directories(forge_tag SYSTEM PRIVATE ${IOTRACE_GLUSTERFS_INCLUDE_DIR})
    target_compile_definitions(forge_tag PRIVATE _FILE_OFFSET_BITS=64)
    target_link_libraries(forge_tag PRIVATE ${IOTRACE_GLUSTERFS_LIBRARY})
    iotrace_gluster_test(gluster.forged_tags test_gluster_forge.py 300
                         --fuse-ops=$<TARGET_FILE:bench_fuse_ops>
                         --gfapi-forge=$<TARGET_FILE:gfapi_forge>
                         --forge-xlator=$<TARGET_FILE:forge_tag>)
  else()
    message(STATUS "libgfapi not found (libglusterfs-dev): gluster.forged_tags left out")
  endif()

  # A compute node and a storage node with clocks seconds apart and drifting
  # (libfaketime): alignment, matching and statistics on a real volume.
  add_executable(known_io ${IOTRACE_TEST_DIR}/mpi/known_io.c)
  target_link_libraries(known_io PRIVATE MPI::MPI_C)
  iotrace_gluster_test(gluster.clock_aligned test_gluster_clock.py 300
                       --known-app=$<TARGET_FILE:known_io>)

  # The live collector over HTTP while a traced job runs on a volume: API,
  # statistics equal to the export's, a real Prometheus, headless Chromium.
  # In the plain build only: the sanitizer build runs the collector's live
  # and HTTP code in the collector.* tests, and what this adds (Prometheus,
  # a browser) is not the C code's.
  if(NOT IOTRACE_SANITIZE)
    iotrace_gluster_test(gluster.live_dashboard test_live.py 600)
  endif()

  # The exports as an analyst loads them (pandas): JSON Lines and CSV against
  # their schema and against --stats.
  iotrace_gluster_test(gluster.analyst_exports test_analyst.py 300)
endif()
