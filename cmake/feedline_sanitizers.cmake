# feedline_sanitizer_flags: carries the FEEDLINE_SANITIZE flags. Every feedline
# library links it PUBLIC, so the flags reach each object file and each link
# that involves feedline code.

set(_feedline_sanitize_allowed "" "address,undefined" "thread")
if(NOT FEEDLINE_SANITIZE IN_LIST _feedline_sanitize_allowed)
  message(FATAL_ERROR
    "FEEDLINE_SANITIZE='${FEEDLINE_SANITIZE}' is not supported; use "
    "'address,undefined', 'thread', or leave it empty.")
endif()
unset(_feedline_sanitize_allowed)

add_library(feedline_sanitizer_flags INTERFACE)

if(FEEDLINE_SANITIZE)
  set(_feedline_sanitize_flags
    -fsanitize=${FEEDLINE_SANITIZE} -fno-omit-frame-pointer -g)
  if(FEEDLINE_SANITIZE STREQUAL "address,undefined")
    # Make every UBSan finding fatal, so a test cannot pass with one.
    list(APPEND _feedline_sanitize_flags -fno-sanitize-recover=all)
  endif()
  target_compile_options(feedline_sanitizer_flags INTERFACE ${_feedline_sanitize_flags})
  target_link_options(feedline_sanitizer_flags INTERFACE ${_feedline_sanitize_flags})
  unset(_feedline_sanitize_flags)
endif()

# libFuzzer learns only from code compiled with coverage instrumentation, and
# the parsers it targets live in the libraries, not in the fuzzer sources.
# Instrument all code and link the coverage hooks into every binary, so tests
# built alongside the fuzzers still link.
if(FEEDLINE_BUILD_FUZZERS AND CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  target_compile_options(feedline_sanitizer_flags INTERFACE -fsanitize=fuzzer-no-link)
  target_link_options(feedline_sanitizer_flags INTERFACE -fsanitize=fuzzer-no-link)
endif()
