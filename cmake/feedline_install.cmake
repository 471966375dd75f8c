# Install rules: `cmake --install <build> --prefix <p>` puts into <p>
#
#   include/feedline/**                  the public headers
#   lib/libfeedline_<name>.a             every feedline_add_library() target
#   lib/cmake/feedline/                  the CMake package:
#     feedlineConfig.cmake               finds the dependencies, then loads
#     feedlineConfigVersion.cmake        feedlineTargets.cmake, which defines
#     feedlineTargets*.cmake             feedline::<name> as in the build
#
# so that another project uses feedline with
#
#   find_package(feedline CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE feedline::pipeline feedline::media)
#
# feedline_add_library() adds each library to the export set itself
# (feedline_install_library below), so a new layer is installed and exported
# without touching this file. Only with FEEDLINE_INSTALL (on for a top-level,
# non-wheel build).

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(FEEDLINE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/feedline)

# Installs library `target` and adds it to the export set as
# feedline::<export_name>. Called by feedline_add_library().
function(feedline_install_library target export_name)
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name})
  set_property(GLOBAL APPEND PROPERTY FEEDLINE_EXPORTED_NAMES ${export_name})
  if(FEEDLINE_INSTALL)
    install(TARGETS ${target}
      EXPORT feedlineTargets
      ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
      INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  endif()
endfunction()

# Writes the package files; called once, at the end of the top-level
# CMakeLists.txt, after every library exists.
function(feedline_install_package)
  if(NOT FEEDLINE_INSTALL)
    return()
  endif()

  # Only headers under include/feedline are public; src/ keeps the private
  # ones (the FFmpeg wrappers, the runners).
  install(DIRECTORY ${feedline_SOURCE_DIR}/include/feedline
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    FILES_MATCHING PATTERN "*.h")

  # Every library links feedline_sanitizer_flags PUBLIC. It is empty in a
  # plain build; in a sanitizer build, code linking the installed libraries
  # needs the same -fsanitize flags, so it travels with them.
  set_target_properties(feedline_sanitizer_flags PROPERTIES
    EXPORT_NAME sanitizer_flags)
  install(TARGETS feedline_sanitizer_flags EXPORT feedlineTargets)

  install(EXPORT feedlineTargets
    NAMESPACE feedline::
    DESTINATION ${FEEDLINE_INSTALL_CMAKEDIR})

  configure_package_config_file(
    ${feedline_SOURCE_DIR}/cmake/feedlineConfig.cmake.in
    ${feedline_BINARY_DIR}/feedlineConfig.cmake
    INSTALL_DESTINATION ${FEEDLINE_INSTALL_CMAKEDIR})
  # 0.x: a minor version may break the API.
  write_basic_package_version_file(
    ${feedline_BINARY_DIR}/feedlineConfigVersion.cmake
    VERSION ${feedline_VERSION}
    COMPATIBILITY SameMinorVersion)
  install(FILES
    ${feedline_BINARY_DIR}/feedlineConfig.cmake
    ${feedline_BINARY_DIR}/feedlineConfigVersion.cmake
    DESTINATION ${FEEDLINE_INSTALL_CMAKEDIR})
endfunction()
