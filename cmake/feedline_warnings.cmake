# feedline_warnings: the warning flags for feedline's own code. Targets link it
# PRIVATE, so the flags never reach code that merely uses feedline, and the
# global CMAKE_CXX_FLAGS stay untouched.

add_library(feedline_warnings INTERFACE)

target_compile_options(feedline_warnings INTERFACE
  -Wall
  -Wextra
  -Wpedantic
  -Wshadow
  -Wconversion
  -Wno-sign-conversion
  # Option structs are meant to be filled with designated initializers that
  # name only the fields differing from their defaults ({.concurrency = 4});
  # -Wextra would flag every such use.
  -Wno-missing-field-initializers
  # Checks the lock annotations in feedline/concurrency/mutex.h.
  $<$<CXX_COMPILER_ID:Clang,AppleClang>:-Wthread-safety>
  # GCC 12 reports impossible overlaps inside libstdc++ for plain string
  # concatenation such as "[" + std::to_string(n) + "]" at -O2/-O3
  # (GCC bug 105329), which would break FEEDLINE_WERROR builds.
  $<$<AND:$<CXX_COMPILER_ID:GNU>,$<VERSION_GREATER_EQUAL:$<CXX_COMPILER_VERSION>,12>,$<VERSION_LESS:$<CXX_COMPILER_VERSION>,13>>:-Wno-restrict>
  $<$<BOOL:${FEEDLINE_WERROR}>:-Werror>)
