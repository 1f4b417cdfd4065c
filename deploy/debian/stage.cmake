# CPACK_PRE_BUILD_SCRIPTS: what Debian policy wants in every package and
# cmake --install has no business writing (it stays plain for other
# prefixes): each package's copyright and changelog, compressed manual
# pages, and the lintian overrides that say why a warning stays.  Run by
# cpack on the staging tree, one directory per component, before the
# packages (and their -dbgsym packages) are made.
foreach(comp IN LISTS CPACK_COMPONENTS_ALL)
  string(TOUPPER "${comp}" COMP)
  set(pkg "${CPACK_DEBIAN_${COMP}_PACKAGE_NAME}")
  set(root "${CPACK_TEMPORARY_DIRECTORY}/${comp}")
  set(doc "${root}/usr/share/doc/${pkg}")
  file(MAKE_DIRECTORY "${doc}")
  file(COPY "${CPACK_IOTRACE_DEBIAN_DIR}/copyright" DESTINATION "${doc}"
       FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
  # gzip -n: no name or time stamp inside, so that a rebuild is the same.
  execute_process(COMMAND gzip -9nc "${CPACK_IOTRACE_DEBIAN_DIR}/changelog"
                  OUTPUT_FILE "${doc}/changelog.gz" RESULT_VARIABLE rc)
  file(GLOB_RECURSE pages "${root}/usr/share/man/*")
  foreach(page IN LISTS pages)
    if(NOT page MATCHES "\\.gz$")
      execute_process(COMMAND gzip -9nf "${page}" RESULT_VARIABLE rc2)
      if(rc2)
        set(rc ${rc2})
      endif()
    endif()
  endforeach()
  if(rc)
    message(FATAL_ERROR "stage.cmake: gzip failed in ${root}")
  endif()
  set(overrides "${CPACK_IOTRACE_DEBIAN_DIR}/lintian/${pkg}")
  if(EXISTS "${overrides}")
    file(COPY "${overrides}" DESTINATION "${root}/usr/share/lintian/overrides"
         FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
  endif()
endforeach()
