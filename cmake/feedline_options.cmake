# Build options. Every option is prefixed FEEDLINE_ so that feedline can be
# added to another CMake project without clashing with its options.

# Tests and examples are for people working on feedline itself: on when this
# is the top-level project, off inside a Python wheel build (scikit-build-core
# sets SKBUILD) or when another project includes us.
if(PROJECT_IS_TOP_LEVEL AND NOT SKBUILD)
  set(_feedline_dev_default ON)
else()
  set(_feedline_dev_default OFF)
endif()
if(SKBUILD)
  set(_feedline_python_default ON)
else()
  set(_feedline_python_default OFF)
endif()

option(FEEDLINE_BUILD_TESTS "Build the C++ tests (GoogleTest)" ${_feedline_dev_default})
option(FEEDLINE_BUILD_BENCHMARKS "Build the C++ benchmarks (Google Benchmark)" OFF)
option(FEEDLINE_BUILD_EXAMPLES "Build the C++ examples" ${_feedline_dev_default})
option(FEEDLINE_BUILD_FUZZERS "Build the libFuzzer targets (needs clang)" OFF)
option(FEEDLINE_BUILD_PYTHON "Build the Python extension _feedline_ext (nanobind)"
  ${_feedline_python_default})
option(FEEDLINE_BUILD_PYTHON_TESTS
  "Build the test-only extension _feedline_testing (never installed)" OFF)
option(FEEDLINE_WITH_FFMPEG "Build video/audio decoding on FFmpeg" ON)
option(FEEDLINE_WITH_TURBOJPEG "Build JPEG decoding on libjpeg-turbo" ON)
option(FEEDLINE_WERROR "Treat compiler warnings as errors" OFF)
# Install rules (headers, libraries, CMake package); off inside a wheel build,
# which installs only the extension, and when another project includes us.
option(FEEDLINE_INSTALL "Generate install rules for the C++ package"
  ${_feedline_dev_default})
option(FEEDLINE_FREE_THREADED
  "Build the extension for free-threaded Python (nanobind FREE_THREADED)" OFF)

set(FEEDLINE_SANITIZE "" CACHE STRING
  "Sanitizers for every target: empty, 'address,undefined' or 'thread'")
set_property(CACHE FEEDLINE_SANITIZE PROPERTY STRINGS "" "address,undefined" "thread")

unset(_feedline_dev_default)
unset(_feedline_python_default)
