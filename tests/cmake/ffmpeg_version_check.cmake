# Run with cmake -P: the FFmpeg version check of configure
# (cmake/feedline_ffmpeg.cmake) on made-up versions. Fails with a message
# naming the case that went wrong.
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/feedline_ffmpeg.cmake)

function(set_versions prefix)
  foreach(entry IN LISTS FEEDLINE_FFMPEG_MIN_VERSIONS)
    string(REPLACE "=" ";" entry "${entry}")
    list(GET entry 0 lib)
    list(GET entry 1 version)
    set(${prefix}_${lib}_VERSION "${version}" PARENT_SCOPE)
  endforeach()
endfunction()

function(expect_error prefix pattern)
  feedline_ffmpeg_version_error(error ${prefix})
  if(NOT error MATCHES "${pattern}")
    message(FATAL_ERROR "${prefix}: expected an error matching '${pattern}', got '${error}'")
  endif()
endfunction()

# Exactly the oldest supported (FFmpeg 5.1): no error.
set_versions(OLDEST)
feedline_ffmpeg_version_error(error OLDEST)
if(NOT error STREQUAL "")
  message(FATAL_ERROR "FFmpeg 5.1's versions refused: ${error}")
endif()

# Newer (FFmpeg 7.1): no error.
set_versions(NEWER)
set(NEWER_libavcodec_VERSION 61.19.100)
set(NEWER_libavformat_VERSION 61.7.100)
set(NEWER_libavutil_VERSION 59.39.100)
feedline_ffmpeg_version_error(error NEWER)
if(NOT error STREQUAL "")
  message(FATAL_ERROR "FFmpeg 7.1's versions refused: ${error}")
endif()

# FFmpeg 4.4's libavcodec: the error names the found and the needed version.
set_versions(OLD)
set(OLD_libavcodec_VERSION 58.134.100)
expect_error(OLD
  "^feedline needs FFmpeg 5\\.1 or newer: libavcodec: found 58\\.134\\.100, needs 59\\.37\\.100 or newer\\.")

# A minor version below (5.0's libavformat 59.16) is refused too; the
# comparison is numeric (59.9 < 59.27 < 59.100).
set_versions(MINOR)
set(MINOR_libavformat_VERSION 59.16.100)
expect_error(MINOR "libavformat: found 59\\.16\\.100, needs 59\\.27\\.100")
set(MINOR_libavformat_VERSION 59.100.0)
feedline_ffmpeg_version_error(error MINOR)
if(NOT error STREQUAL "")
  message(FATAL_ERROR "59.100.0 refused as older than 59.27.100: ${error}")
endif()

# A library pkg-config did not report, and two problems at once.
set_versions(MISSING)
unset(MISSING_libswscale_VERSION)
set(MISSING_libavfilter_VERSION 7.110.100)
expect_error(MISSING
  "libswscale: not found, needs 6\\.7\\.100 or newer; libavfilter: found 7\\.110\\.100, needs 8\\.44\\.100")

message(STATUS "ffmpeg version check: all cases pass")
