# The target vocabulary for feedline's directory CMakeLists.txt files:
#
#   feedline_add_library(NAME <n> [SRCS ...] [PUBLIC_DEPS ...] [PRIVATE_DEPS ...])
#   feedline_add_test(NAME <n> SRCS ... [DEPS ...] [LABELS ...])
#   feedline_add_benchmark(NAME <n> SRCS ... [DEPS ...])
#   feedline_add_fuzzer(NAME <n> SRCS ... [DEPS ...])
#   feedline_add_example(NAME <n> SRCS ... [DEPS ...])
#
# With these, a directory's CMakeLists.txt reads as a plain list of targets.

include(GoogleTest)

# Parses the common NAME/SRCS/DEPS signature into ARG_* in the caller's scope
# and rejects unknown or missing arguments. `function_name` is for messages.
macro(_feedline_parse_args function_name one_value_keywords multi_value_keywords)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "${one_value_keywords}"
    "${multi_value_keywords}")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR
      "${function_name}: unknown arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_NAME)
    message(FATAL_ERROR "${function_name}: NAME is required")
  endif()
endmacro()

# Library `feedline_<NAME>`, alias `feedline::<NAME>`. Without SRCS it is a
# header-only INTERFACE library. Static libraries are position-independent
# because the Python extension (a shared object) links them. Every library is
# installed and exported as feedline::<NAME> (feedline_install.cmake), so an
# installed package offers the same target names as the build. The warning
# flags stay in the build: they are linked as a BUILD_INTERFACE.
function(feedline_add_library)
  _feedline_parse_args(feedline_add_library "NAME" "SRCS;PUBLIC_DEPS;PRIVATE_DEPS")
  set(target feedline_${ARG_NAME})

  if(NOT ARG_SRCS)
    if(ARG_PRIVATE_DEPS)
      message(FATAL_ERROR
        "feedline_add_library(${ARG_NAME}): PRIVATE_DEPS need SRCS")
    endif()
    add_library(${target} INTERFACE)
    target_include_directories(${target} INTERFACE
      $<BUILD_INTERFACE:${feedline_SOURCE_DIR}/include>)
    target_link_libraries(${target} INTERFACE
      ${ARG_PUBLIC_DEPS} Threads::Threads feedline_sanitizer_flags)
  else()
    add_library(${target} STATIC ${ARG_SRCS})
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    target_include_directories(${target}
      PUBLIC $<BUILD_INTERFACE:${feedline_SOURCE_DIR}/include>
      PRIVATE ${feedline_SOURCE_DIR}/src)
    target_link_libraries(${target}
      PUBLIC ${ARG_PUBLIC_DEPS} Threads::Threads feedline_sanitizer_flags
      PRIVATE ${ARG_PRIVATE_DEPS} $<BUILD_INTERFACE:feedline_warnings>)
  endif()

  add_library(feedline::${ARG_NAME} ALIAS ${target})
  feedline_install_library(${target} ${ARG_NAME})
endfunction()

# GoogleTest executable `<NAME>`; ctest learns its test cases from the binary.
# Discovery runs when ctest starts (PRE_TEST), not after the build, so a
# sanitizer build never runs a test binary as a build step, and a wrapper put
# around ctest (such as `setarch -R` for TSan) also covers the discovery run.
function(feedline_add_test)
  _feedline_parse_args(feedline_add_test "NAME" "SRCS;DEPS;LABELS")
  if(NOT ARG_SRCS)
    message(FATAL_ERROR "feedline_add_test(${ARG_NAME}): SRCS is required")
  endif()

  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_include_directories(${ARG_NAME} PRIVATE
    ${feedline_SOURCE_DIR}/src
    ${feedline_SOURCE_DIR}/tests/cpp)
  target_link_libraries(${ARG_NAME} PRIVATE
    ${ARG_DEPS} GTest::gtest_main GTest::gmock
    feedline_warnings feedline_sanitizer_flags)

  gtest_discover_tests(${ARG_NAME}
    DISCOVERY_TIMEOUT 60
    DISCOVERY_MODE PRE_TEST
    TEST_LIST ${ARG_NAME}_TESTS)

  # Labels are set by a script that ctest runs after discovery rather than
  # through gtest_discover_tests(PROPERTIES ...): CMake 3.25's GoogleTest
  # module turns a list of several labels into separate property names.
  if(ARG_LABELS)
    set(labels_file ${CMAKE_CURRENT_BINARY_DIR}/${ARG_NAME}_labels.cmake)
    file(WRITE ${labels_file}
      "if(${ARG_NAME}_TESTS)\n"
      "  set_tests_properties(\${${ARG_NAME}_TESTS}\n"
      "    PROPERTIES LABELS \"${ARG_LABELS}\")\n"
      "endif()\n")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${labels_file})
  endif()

  # `feedline_tests_<label>` builds every test binary with that label, so a
  # tree that runs only some labels (TSan: `engine`) builds only those.
  foreach(label IN LISTS ARG_LABELS)
    if(NOT TARGET feedline_tests_${label})
      add_custom_target(feedline_tests_${label})
    endif()
    add_dependencies(feedline_tests_${label} ${ARG_NAME})
  endforeach()
endfunction()

# Google Benchmark executable `<NAME>`. The sources define main() with
# BENCHMARK_MAIN(); benchmark_main is a static archive, so it only supplies
# main() to a binary that lacks one.
function(feedline_add_benchmark)
  _feedline_parse_args(feedline_add_benchmark "NAME" "SRCS;DEPS")
  if(NOT ARG_SRCS)
    message(FATAL_ERROR "feedline_add_benchmark(${ARG_NAME}): SRCS is required")
  endif()

  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE
    ${ARG_DEPS} benchmark::benchmark feedline_warnings feedline_sanitizer_flags)
  if(TARGET benchmark::benchmark_main)
    target_link_libraries(${ARG_NAME} PRIVATE benchmark::benchmark_main)
  endif()
endfunction()

# libFuzzer executable `<NAME>`; the sources define LLVMFuzzerTestOneInput().
# libFuzzer ships with clang only, so with another compiler this is a no-op.
function(feedline_add_fuzzer)
  _feedline_parse_args(feedline_add_fuzzer "NAME" "SRCS;DEPS")
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(STATUS
      "feedline: fuzzer ${ARG_NAME} skipped: fuzzers need clang "
      "(compiler is ${CMAKE_CXX_COMPILER_ID})")
    return()
  endif()
  if(NOT ARG_SRCS)
    message(FATAL_ERROR "feedline_add_fuzzer(${ARG_NAME}): SRCS is required")
  endif()

  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_include_directories(${ARG_NAME} PRIVATE ${feedline_SOURCE_DIR}/src)
  target_compile_options(${ARG_NAME} PRIVATE -fsanitize=fuzzer)
  target_link_options(${ARG_NAME} PRIVATE -fsanitize=fuzzer)
  target_link_libraries(${ARG_NAME} PRIVATE
    ${ARG_DEPS} feedline_warnings feedline_sanitizer_flags)
endfunction()

# Example executable `<NAME>`; examples use only the public headers.
function(feedline_add_example)
  _feedline_parse_args(feedline_add_example "NAME" "SRCS;DEPS")
  if(NOT ARG_SRCS)
    message(FATAL_ERROR "feedline_add_example(${ARG_NAME}): SRCS is required")
  endif()

  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE
    ${ARG_DEPS} feedline_warnings feedline_sanitizer_flags)
endfunction()
