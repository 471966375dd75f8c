#!/usr/bin/env bash
# The ctest ffmpeg_headers_check: scripts/ffmpeg_headers_check.sh, offline.
# Against the installed FFmpeg's headers (FFMPEG_HEADERS) a file of the
# project compiles and the version it reports is theirs; a file using a
# deprecated FFmpeg function (av_init_packet, deprecated since 5.0) fails
# the check; an unreachable mirror is reported as a fetch failure (exit 2),
# not as a compile error.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
check=$root/scripts/ffmpeg_headers_check.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export FFMPEG_HEADERS_CACHE=$work/cache
failures=0

expect() { # expect <name> <wanted status> <pattern>, of $out and $rc
  local flat
  flat=$(tr '\n' ' ' <<<"$out")
  if [[ $rc -ne $2 ]] || ! grep -qE "$3" <<<"$flat"; then
    echo "FAILED: $1: wanted status $2 and output matching '$3', got $rc:"
    echo "$out"
    failures=$((failures + 1))
  else
    echo "passed: $1"
  fi
}

sys_inc=$(dirname "$(dirname "$(echo '#include <libavcodec/avcodec.h>' |
  c++ -M -x c++ - | grep -oE '[^ ]*/libavcodec/avcodec.h' | head -1)")")
major=$(printf '%s\n' '#include <libavcodec/version.h>' LIBAVCODEC_VERSION_MAJOR |
  c++ -E -P -x c++ - | tail -1)

out=$(FFMPEG_HEADERS=$sys_inc FFMPEG_CHECK_FILES=src/media/ffmpeg/audio.cc \
  "$check" 2>&1)
rc=$?
expect "the project's audio.cc against the installed headers" 0 \
  "libavcodec $major\\..*all 1 compiles passed"

cat >"$work/deprecated.cc" <<'CC'
extern "C" {
#include <libavcodec/avcodec.h>
}
void reset(AVPacket* packet) { av_init_packet(packet); }
CC
out=$(FFMPEG_HEADERS=$sys_inc FFMPEG_CHECK_FILES=$work/deprecated.cc \
  "$check" 2>&1)
rc=$?
expect "a deprecated function fails the check" 1 \
  "FAIL .*(deprecated|not declared).*1 of 1 compiles failed"

out=$(FFMPEG_MIRROR=http://127.0.0.1:1/debian FFMPEG_SUITES=trixie "$check" 2>&1)
rc=$?
expect "an unreachable mirror is a fetch failure" 2 \
  "could not fetch the FFmpeg headers for trixie.*not a compile error"

exit $((failures > 0))
