# CPACK_POST_BUILD_SCRIPTS: the -dbgsym packages as CPack 3.25 writes them
# need three repairs, made here by unpacking and rebuilding each one:
# - their md5sums name the files by CPack's staging path, not the installed
#   one (dpkg --verify and lintian then find none of them);
# - they have no copyright or changelog: as dh_strip makes them,
#   /usr/share/doc/PACKAGE-dbgsym is a link to the doc directory of
#   PACKAGE, which they depend on in this exact version;
# - the .debug files are executable, which they are not.
foreach(ddeb IN LISTS CPACK_PACKAGE_FILES)
  if(NOT ddeb MATCHES "\\.ddeb$")
    continue()
  endif()
  set(tree "${ddeb}.tree")
  file(REMOVE_RECURSE "${tree}")
  execute_process(COMMAND dpkg-deb -R "${ddeb}" "${tree}" RESULT_VARIABLE rc)
  execute_process(COMMAND dpkg-deb -f "${ddeb}" Package Depends
                  OUTPUT_VARIABLE fields RESULT_VARIABLE rc2)
  if(rc OR rc2 OR NOT fields MATCHES "Package: ([^\n]+)-dbgsym\n")
    message(FATAL_ERROR "dbgsym.cmake: cannot read ${ddeb}")
  endif()
  set(parent "${CMAKE_MATCH_1}")
  file(MAKE_DIRECTORY "${tree}/usr/share/doc")
  file(CREATE_LINK "${parent}" "${tree}/usr/share/doc/${parent}-dbgsym" SYMBOLIC)
  file(GLOB_RECURSE debug_files RELATIVE "${tree}" "${tree}/usr/lib/debug/*")
  set(md5sums "")
  foreach(f IN LISTS debug_files)
    file(CHMOD "${tree}/${f}" PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
    file(MD5 "${tree}/${f}" sum)
    string(APPEND md5sums "${sum}  ${f}\n")
  endforeach()
  file(WRITE "${tree}/DEBIAN/md5sums" "${md5sums}")
  execute_process(COMMAND dpkg-deb --root-owner-group -b "${tree}" "${ddeb}"
                  OUTPUT_QUIET RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "dbgsym.cmake: cannot rebuild ${ddeb}")
  endif()
  file(REMOVE_RECURSE "${tree}")
endforeach()
