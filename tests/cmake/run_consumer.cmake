# Script run by the install_consumer test (see CMakeLists.txt here):
#
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DGENERATOR=...
#         -DCXX_COMPILER=... -DBUILD_TYPE=... -DEXPECTED_TARGETS=a,b,...
#         -P run_consumer.cmake
#
# Fails (FATAL_ERROR) at the first step that does.

foreach(var BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER EXPECTED_TARGETS)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_consumer.cmake: ${var} is not set")
  endif()
endforeach()
if(NOT BUILD_TYPE)
  set(BUILD_TYPE Release)
endif()

set(prefix ${WORK_DIR}/prefix)
set(consumer_build ${WORK_DIR}/build)
file(REMOVE_RECURSE ${WORK_DIR})

function(run step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install_consumer: ${step} failed (${rc}): ${ARGN}")
  endif()
endfunction()

run(install ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

# Only the public headers: each installed header is one of include/feedline.
file(GLOB_RECURSE installed RELATIVE ${prefix}/include ${prefix}/include/*)
if(NOT installed)
  message(FATAL_ERROR "install_consumer: no headers under ${prefix}/include")
endif()
foreach(header IN LISTS installed)
  if(NOT EXISTS ${SOURCE_DIR}/include/${header})
    message(FATAL_ERROR
      "install_consumer: ${header} is installed but not a public header")
  endif()
endforeach()
# The build's warning flags stay in the build.
file(GLOB exports ${prefix}/lib*/cmake/feedline/feedlineTargets*.cmake)
foreach(file IN LISTS exports)
  file(READ ${file} text)
  if(text MATCHES "feedline_warnings|${SOURCE_DIR}")
    message(FATAL_ERROR
      "install_consumer: ${file} refers to the build tree or its warnings")
  endif()
endforeach()

# The consumer finds feedline through CMAKE_PREFIX_PATH only; the user
# package registry is off so it cannot pick up some other copy.
run(configure ${CMAKE_COMMAND}
  -S ${SOURCE_DIR}/tests/cmake/consumer
  -B ${consumer_build}
  -G ${GENERATOR}
  -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
  -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
  -DCMAKE_PREFIX_PATH=${prefix}
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  -DFEEDLINE_EXPECTED_TARGETS=${EXPECTED_TARGETS})
run(build ${CMAKE_COMMAND} --build ${consumer_build})
run(run ${consumer_build}/consumer
  ${SOURCE_DIR}/fuzz/corpus/image/rgb_q90.jpg
  ${SOURCE_DIR}/fuzz/corpus/image/rgba.png)
