# FFmpeg's libraries and the oldest version of each that feedline builds
# with: those of FFmpeg 5.1 (Debian 12), the first release with the
# AVChannelLayout API that src/media/ffmpeg/ uses. README.md states the
# same range; tests/cmake/ffmpeg_version_check.cmake tests the check.
set(FEEDLINE_FFMPEG_MIN_VERSIONS
  libavformat=59.27.100
  libavcodec=59.37.100
  libavutil=57.28.100
  libswresample=4.7.100
  libswscale=6.7.100
  libavfilter=8.44.100)
set(FEEDLINE_FFMPEG_MIN_RELEASE 5.1)

# feedline_ffmpeg_modules(<out>): the pkg-config modules with their
# constraints ("libavformat>=59.27.100;..."), for the installed package.
function(feedline_ffmpeg_modules out)
  set(modules)
  foreach(entry IN LISTS FEEDLINE_FFMPEG_MIN_VERSIONS)
    string(REPLACE "=" ">=" entry "${entry}")
    list(APPEND modules "${entry}")
  endforeach()
  set(${out} "${modules}" PARENT_SCOPE)
endfunction()

# feedline_ffmpeg_version_error(<out> <prefix>): "" when every library's
# version (<prefix>_<library>_VERSION, as pkg_check_modules sets it) is at
# least the oldest supported; otherwise a message that names, for each
# library that is too old or missing, the version found and the one needed.
function(feedline_ffmpeg_version_error out prefix)
  set(problems)
  foreach(entry IN LISTS FEEDLINE_FFMPEG_MIN_VERSIONS)
    string(REPLACE "=" ";" entry "${entry}")
    list(GET entry 0 lib)
    list(GET entry 1 needed)
    set(found "${${prefix}_${lib}_VERSION}")
    if(found STREQUAL "")
      list(APPEND problems "${lib}: not found, needs ${needed} or newer")
    elseif(found VERSION_LESS needed)
      list(APPEND problems
        "${lib}: found ${found}, needs ${needed} or newer")
    endif()
  endforeach()
  if(problems)
    list(JOIN problems "; " problems)
    set(${out} "feedline needs FFmpeg ${FEEDLINE_FFMPEG_MIN_RELEASE} or \
newer: ${problems}. Install newer FFmpeg development packages or point \
PKG_CONFIG_PATH at a newer FFmpeg." PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

# feedline_check_ffmpeg_versions(<prefix>): stops the configure with
# feedline_ffmpeg_version_error()'s message when there is one.
function(feedline_check_ffmpeg_versions prefix)
  feedline_ffmpeg_version_error(error ${prefix})
  if(error)
    message(FATAL_ERROR "${error}")
  endif()
endfunction()
