# Debian packages, one per install component (cpack -G DEB in a build
# configured for /usr, deploy/build-packages.sh):
#
#   iotrace-agent          the node agent, its unit and configuration
#   iotrace-collector      the collector and iotrace-export, the dashboard, the docs
#   libiotrace-client      the preloaded library (no MPI dependency: it finds MPI at run time)
#   iotrace-replay         iotrace-replay, an MPI program (MPICH)
#   libiotrace-server1     libiotrace-server, for storage-server hooks
#   libiotrace-server-dev  its header, .so link and pkg-config file
#   glusterfs-iotrace      the GlusterFS translators and volume.sh
#
# and for each a -dbgsym package (.ddeb) with the debug information of its
# stripped binaries under /usr/lib/debug/.build-id.  Shared-library
# dependencies come from dpkg-shlibdeps; the maintainer scripts
# (deploy/debian/) make the service user and enable nothing;
# deploy/debian/stage.cmake adds the copyright, changelog and lintian
# overrides and compresses the manual pages.  tests/packages_test.py runs
# lintian on all of them.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME iotrace)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "iotrace maintainers <iotrace@example.org>")
# No CPACK_PACKAGE_DESCRIPTION_SUMMARY: CPack would put that one line in
# front of every package's own summary (the first line of its description).
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Stripped binaries; their debug information (the build is RelWithDebInfo)
# in PACKAGE-dbgsym, found by build id.
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)
set(CPACK_PRE_BUILD_SCRIPTS ${CMAKE_CURRENT_SOURCE_DIR}/deploy/debian/stage.cmake)
set(CPACK_POST_BUILD_SCRIPTS ${CMAKE_CURRENT_SOURCE_DIR}/deploy/debian/dbgsym.cmake)
set(CPACK_IOTRACE_DEBIAN_DIR ${CMAKE_CURRENT_SOURCE_DIR}/deploy/debian)
# libiotrace-server.so.1, which the GlusterFS translator links, is in a
# package of this build (libiotrace-server1, declared below by hand).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR}/clientlib)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://example.org/iotrace")
set(CPACK_COMPONENTS_ALL agent collector client replay server server-dev)
if(TARGET xlator-iotrace-client)
  list(APPEND CPACK_COMPONENTS_ALL gluster)
endif()

set(CPACK_DEBIAN_AGENT_PACKAGE_NAME iotrace-agent)
set(CPACK_DEBIAN_COLLECTOR_PACKAGE_NAME iotrace-collector)
set(CPACK_DEBIAN_CLIENT_PACKAGE_NAME libiotrace-client)
set(CPACK_DEBIAN_REPLAY_PACKAGE_NAME iotrace-replay)
set(CPACK_DEBIAN_SERVER_PACKAGE_NAME libiotrace-server1)
set(CPACK_DEBIAN_SERVER-DEV_PACKAGE_NAME libiotrace-server-dev)
set(CPACK_DEBIAN_GLUSTER_PACKAGE_NAME glusterfs-iotrace)
# One string each (CONCAT): set() with several quoted parts would make a
# list, and the "; " between its items would end up in the description.
string(CONCAT CPACK_COMPONENT_AGENT_DESCRIPTION "iotrace node agent\n"
    "Forwards the trace batches of this node's MPI ranks and storage servers\n"
    "to the iotrace collector, spooling them on disk until they are stored.")
string(CONCAT CPACK_COMPONENT_COLLECTOR_DESCRIPTION "iotrace collector, exporter and dashboard\n"
    "Stores trace batches durably, matches MPI-IO calls with the disk\n"
    "operations they caused, serves a live dashboard, a JSON API and\n"
    "Prometheus metrics; iotrace-export writes JSON Lines, statistics and\n"
    "SLOG-2 for Jumpshot.")
string(CONCAT CPACK_COMPONENT_CLIENT_DESCRIPTION "iotrace library preloaded into MPI ranks\n"
    "Gives every MPI-IO call a CallID and records it with the POSIX I/O it\n"
    "makes.")
string(CONCAT CPACK_COMPONENT_REPLAY_DESCRIPTION "replay a traced job's I/O on another file system\n"
    "iotrace-replay, run under mpiexec, runs every MPI-IO call of a job\n"
    "stored by the iotrace collector again, with its sizes, offsets,\n"
    "collectives and timing.")
string(CONCAT CPACK_COMPONENT_SERVER_DESCRIPTION "iotrace library for storage-server hooks\n"
    "Records a storage server's disk operations with the CallIDs that caused\n"
    "them.")
string(CONCAT CPACK_COMPONENT_SERVER-DEV_DESCRIPTION "iotrace storage-server library: development files\n"
    "Header <iotrace/server.h>, the .so link and iotrace-server.pc.")
string(CONCAT CPACK_COMPONENT_GLUSTER_DESCRIPTION "iotrace translators for GlusterFS\n"
    "iotrace-client tags requests with the caller's CallID; iotrace-server\n"
    "records every disk operation on the brick with it.")

# Besides what dpkg-shlibdeps finds: the dashboard's chart library, the
# tools the scripts use, the runtime library of the -dev and GlusterFS parts.
set(CPACK_DEBIAN_COLLECTOR_PACKAGE_DEPENDS "libjs-chart.js, passwd")
set(CPACK_DEBIAN_AGENT_PACKAGE_DEPENDS "passwd")
set(CPACK_DEBIAN_SERVER-DEV_PACKAGE_DEPENDS "libiotrace-server1 (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_GLUSTER_PACKAGE_DEPENDS "libiotrace-server1 (= ${PROJECT_VERSION}), glusterfs-server")
set(CPACK_DEBIAN_AGENT_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_CLIENT_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_REPLAY_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_SERVER_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_SERVER-DEV_PACKAGE_SECTION libdevel)

foreach(role agent collector)
  string(TOUPPER ${role} ROLE)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/debian/${role})
  foreach(script postinst prerm postrm)
    set(PKG iotrace-${role})
    set(UNIT iotrace-${role}.service)
    # collector.conf names keys/agents (curve-clients): the directory the
    # agents' public keys go into.
    set(KEY_DIRS /etc/iotrace/keys)
    if(role STREQUAL "collector")
      string(APPEND KEY_DIRS " /etc/iotrace/keys/agents")
    endif()
    configure_file(${CMAKE_CURRENT_SOURCE_DIR}/deploy/debian/${script}.in ${dir}/${script} @ONLY)
    file(CHMOD ${dir}/${script} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE
         GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
  endforeach()
  set(CPACK_DEBIAN_${ROLE}_PACKAGE_CONTROL_EXTRA ${dir}/postinst ${dir}/prerm ${dir}/postrm)
  # The configuration file is the administrator's once installed.
  set(conffiles ${dir}/conffiles)
  file(WRITE ${conffiles} "/etc/iotrace/${role}.conf\n")
  list(APPEND CPACK_DEBIAN_${ROLE}_PACKAGE_CONTROL_EXTRA ${conffiles})
endforeach()

# The libraries are in ldconfig's directories: its cache is remade by the
# trigger, once per dpkg run.
foreach(ROLE CLIENT SERVER)
  set(CPACK_DEBIAN_${ROLE}_PACKAGE_CONTROL_EXTRA ${CMAKE_CURRENT_SOURCE_DIR}/deploy/debian/triggers)
endforeach()
# libiotrace-server1's shlibs, for dpkg-shlibdeps of the packages that link
# it (written here: CPack would write one for every package with a shared
# object, the translators and the preload library too, which have none).
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/debian/server/shlibs
     "libiotrace-server 1 libiotrace-server1 (>= ${PROJECT_VERSION})\n")
list(APPEND CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA ${CMAKE_CURRENT_BINARY_DIR}/debian/server/shlibs)

include(CPack)
