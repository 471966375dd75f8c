#!/usr/bin/env bash
# Compiles every translation unit that includes FFmpeg headers against the
# FFmpeg development headers of newer Debian suites, so the code paths for
# FFmpeg newer than the one installed keep compiling (`make ffmpeg-compat`).
#
# For each suite in FFMPEG_SUITES (default "trixie sid": FFmpeg 7.1 and the
# newest packaged release), the -dev packages of that suite's current
# version are downloaded with apt-get into build/ffmpeg-headers/<suite>/
# (the system's apt configuration is not touched; nothing is installed),
# their headers extracted, and each file compiled with -fsyntax-only, the
# project's flags (build/release/compile_commands.json when present) and
# -Werror: a deprecation fails the check, since what FFmpeg deprecates in
# one major version it removes in the next. Each compile also asserts that
# the fetched headers, not the system's, were the ones used.
#
# Cached: package lists are refreshed when older than a day (or with
# FFMPEG_HEADERS_REFRESH=1), and a package already downloaded for the same
# version is not fetched again; when the refresh fails, headers fetched
# before are checked (with a note saying so). Exit status: 0 all compiled, 1 a file failed
# to compile, 2 the headers could not be fetched (network or registry).
#
# Environment: FFMPEG_SUITES (Debian suites), FFMPEG_HEADERS (a local
# FFmpeg include directory, e.g. of an FFmpeg built from git, checked
# instead of the suites), FFMPEG_CHECK_FILES (the files to compile instead
# of every one that includes FFmpeg), FFMPEG_MIRROR, FFMPEG_HEADERS_CACHE
# (instead of build/ffmpeg-headers), CXX.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
suites=${FFMPEG_SUITES:-"trixie sid"}
mirror=${FFMPEG_MIRROR:-http://deb.debian.org/debian}
keyring=${FFMPEG_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}
base=${FFMPEG_HEADERS_CACHE:-$root/build/ffmpeg-headers}
cxx=${CXX:-c++}
packages=(libavcodec-dev libavformat-dev libavutil-dev libswscale-dev
  libswresample-dev libavfilter-dev)

# The files that include FFmpeg headers: every one that includes a private
# header of src/media/ffmpeg (ffmpeg.h, or encoding.h which includes it) or
# an FFmpeg header directly.
if [[ -n ${FFMPEG_CHECK_FILES:-} ]]; then
  read -r -a files <<<"$FFMPEG_CHECK_FILES"
else
  mapfile -t files < <(grep -rlE '#include ("media/ffmpeg/[a-z_]+\.h"|<lib(av|sw))' \
    src include python tests fuzz bench examples 2>/dev/null |
    grep -E '\.(cc|cpp)$' | sort)
fi
if [[ ${#files[@]} -eq 0 ]]; then
  echo "ffmpeg-compat: no files include FFmpeg headers" >&2
  exit 1
fi

# The project's compile flags for a file, one a line: those of the release
# tree's compile_commands.json when it has the file, otherwise the include
# directories and the warnings of cmake/feedline_warnings.cmake.
flags_for() {
  python3 - "$root" "$1" <<'PY'
import json, os, shlex, sys
root, path = sys.argv[1], os.path.realpath(os.path.join(sys.argv[1], sys.argv[2]))
fallback = [f"-I{root}/include", f"-I{root}/src", "-isystem/usr/include/libpng16",
            "-std=c++20", "-Wall", "-Wextra", "-Wpedantic", "-Wshadow",
            "-Wconversion", "-Wno-sign-conversion", "-Wno-missing-field-initializers"]
flags = None
db = os.path.join(root, "build/release/compile_commands.json")
if os.path.exists(db):
    for entry in json.load(open(db)):
        if os.path.realpath(entry["file"]) != path:
            continue
        args = entry.get("arguments") or shlex.split(entry["command"])
        flags, skip = [], False
        for a in args[1:]:
            if skip:
                skip = False
            elif a in ("-o", "-MF", "-MT", "-MQ"):
                skip = True
            elif a in ("-c", "-MD", "-MMD", "-DNDEBUG", entry["file"]):
                pass
            elif not a.startswith("-O"):
                flags.append(a)
        break
print("\n".join(flags if flags is not None else fallback))
PY
}

fetch_failed() {
  echo "ffmpeg-compat: could not fetch the FFmpeg headers for $1 from" \
    "$mirror ($2); this is a network or registry problem, not a compile" \
    "error" >&2
  exit 2
}

# The first line of an apt log that says what failed.
first_error() {
  { grep -E '^(W|E): (Failed|Some index|Unable)' "$1" || grep -E '^E:' "$1" ||
    tail -1 "$1"; } | head -1
}

# Fetches the suite's -dev packages and extracts them into
# $base/<suite>/root; sets `version` (libavcodec-dev's).
fetch_suite() {
  local suite=$1 d=$base/$1/apt
  if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
    echo "ffmpeg-compat: fetching headers needs apt-get and dpkg-deb (Debian," \
      "Ubuntu); set FFMPEG_HEADERS to a local FFmpeg include directory instead" >&2
    exit 2
  fi
  mkdir -p "$d/lists/partial" "$d/cache/archives/partial" "$base/$suite/debs"
  touch "$d/status"
  echo "deb [signed-by=$keyring] $mirror $suite main" >"$d/sources.list"
  local opts=(-o "Dir::Etc::sourcelist=$d/sources.list"
    -o "Dir::Etc::sourceparts=/dev/null" -o "Dir::State::Lists=$d/lists"
    -o "Dir::Cache=$d/cache" -o "Dir::State::status=$d/status"
    -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root")
  local stamp=$d/lists/.updated
  if [[ -n ${FFMPEG_HEADERS_REFRESH:-} || ! -f $stamp ||
    -n $(find "$stamp" -mmin +1440) ]]; then
    if ! apt-get -q "${opts[@]}" update >"$d/update.log" 2>&1 ||
      grep -qE '^(W|E): (Failed|Some index)' "$d/update.log"; then
      if [[ -f $stamp && -f $base/$suite/root/.versions ]]; then
        # Offline with headers fetched before: check those, and say so.
        echo "ffmpeg-compat: could not refresh the package lists of $suite" \
          "($(first_error "$d/update.log")); checking the headers fetched" \
          "before" >&2
        version=$(sed -E 's/^[^=]*=([^ ]*).*/\1/' "$base/$suite/root/.versions")
        return
      fi
      fetch_failed "$suite" "apt-get update: $(first_error "$d/update.log")"
    fi
    touch "$stamp"
  fi
  local pkg name ver want=() missing=()
  for pkg in "${packages[@]}"; do
    ver=$(apt-cache "${opts[@]}" policy "$pkg" 2>/dev/null | awk '/Candidate:/ {print $2}')
    if [[ -z $ver || $ver == "(none)" ]]; then
      fetch_failed "$suite" "no $pkg in the package lists"
    fi
    want+=("$pkg=$ver")
  done
  version=${want[0]#*=}
  deb_file() { # the downloaded file of name=version, if any
    compgen -G "$base/$suite/debs/${1%%=*}_$(echo "${1#*=}" | sed 's/:/%3a/')_*.deb" | head -1
  }
  for pkg in "${want[@]}"; do
    [[ -n $(deb_file "$pkg") ]] || missing+=("$pkg")
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    (cd "$base/$suite/debs" && apt-get -q "${opts[@]}" download "${missing[@]}") \
      >"$d/download.log" 2>&1 ||
      fetch_failed "$suite" "apt-get download: $(first_error "$d/download.log")"
  fi
  local tree=$base/$suite/root
  if [[ ! -f $tree/.versions || $(cat "$tree/.versions") != "${want[*]}" ]]; then
    rm -rf "$tree"
    mkdir -p "$tree"
    for pkg in "${want[@]}"; do
      dpkg-deb -x "$(deb_file "$pkg")" "$tree"
    done
    echo "${want[*]}" >"$tree/.versions"
  fi
}

# With clang (CXX=clang++), the flags of the clang build (the asan preset)
# on top of the release tree's gcc ones.
extra=()
if "$cxx" --version 2>/dev/null | grep -q clang; then
  extra=(-Wno-unknown-warning-option -Wthread-safety)
fi

total=0
failed=0
checked=()

# check_tree <label> <include dir> <work dir>: compiles every file against
# the FFmpeg headers in <include dir>.
check_tree() {
  local label=$1 inc=$2 work=$3
  mkdir -p "$work"
  # The headers' libavcodec version; every compile asserts it, so the
  # system's FFmpeg headers cannot be picked up instead.
  local major minor
  read -r major minor < <(printf '%s\n' '#include <libavcodec/version.h>' \
    'LIBAVCODEC_VERSION_MAJOR LIBAVCODEC_VERSION_MINOR' |
    "$cxx" -E -P -isystem "$inc" -x c++ - 2>/dev/null | tail -1)
  if [[ ! $major =~ ^[0-9]+$ || ! -f $inc/libavcodec/avcodec.h ]]; then
    echo "ffmpeg-compat: no FFmpeg headers (libavcodec/avcodec.h) in $inc" >&2
    exit 1
  fi
  local guard=$work/expect_version.h
  printf '%s\n' '#include <libavcodec/version.h>' \
    "#if LIBAVCODEC_VERSION_MAJOR != $major || LIBAVCODEC_VERSION_MINOR != $minor" \
    "#error \"ffmpeg-compat: the FFmpeg headers in $inc were not the ones included\"" \
    '#endif' >"$guard"
  echo "== $label (libavcodec $major.$minor), headers in ${inc#"$root"/}"
  local ok=0 f log flags
  for f in "${files[@]}"; do
    mapfile -t flags < <(flags_for "$f")
    total=$((total + 1))
    log=$work/$(echo "$f" | tr / _).log
    if "$cxx" -isystem "$inc" "${flags[@]}" "${extra[@]}" -fsyntax-only -Werror \
      -Wdeprecated-declarations -include "$guard" "$f" >"$log" 2>&1; then
      echo "  ok    $f"
      ok=$((ok + 1))
    else
      echo "  FAIL  $f"
      sed 's/^/        /' "$log"
      failed=$((failed + 1))
    fi
  done
  checked+=("$label $ok/${#files[@]}")
}

if [[ -n ${FFMPEG_HEADERS:-} ]]; then
  check_tree "local FFmpeg" "$(cd "$FFMPEG_HEADERS" && pwd)" "$base/local"
else
  for suite in $suites; do
    fetch_suite "$suite"
    avcodec_h=$(find "$base/$suite/root/usr/include" -path '*/libavcodec/avcodec.h' | head -1)
    check_tree "$suite: FFmpeg ${version#*:}" "$(dirname "$(dirname "$avcodec_h")")" \
      "$base/$suite"
  done
fi

summary=$(printf '%s; ' "${checked[@]}")
if [[ $failed -eq 0 ]]; then
  echo "ffmpeg-compat: all $total compiles passed (${summary%; })"
else
  echo "ffmpeg-compat: $failed of $total compiles failed (${summary%; })"
  exit 1
fi
