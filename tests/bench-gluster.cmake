# Drivers of the GlusterFS translator benchmark (not tests; see
# tests/bench/bench-gluster.sh and docs/performance.md, "GlusterFS
# translators"): small synchronous operations through a FUSE mount, with or
# without a published registry entry, and MPI-IO calls of a few sizes.
if(TARGET xlator-iotrace-client)
  add_executable(bench_fuse_ops ${IOTRACE_TEST_DIR}/bench/bench_fuse_ops.c)
  target_link_libraries(bench_fuse_ops PRIVATE iotrace-registry)
  add_executable(bench_mpiio_sizes ${IOTRACE_TEST_DIR}/bench/bench_mpiio_sizes.c)
  target_link_libraries(bench_mpiio_sizes PRIVATE MPI::MPI_C)
endif()
