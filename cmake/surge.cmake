# surge_module(NAME SOURCES ... DEPS ...): one static library per module folder.
function(surge_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} STATIC ${M_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR}/src)
  target_link_libraries(${name} PUBLIC ${M_DEPS} PRIVATE ${M_PRIVATE_DEPS})
endfunction()

# surge_test(NAME LABEL SOURCES ... DEPS ... [COST C]): one gtest binary, registered with ctest.
# COST (ctest's property, on each of its tests) starts long tests first under ctest -j, so that a
# clean tree, which has no timings of an earlier run, does not end on one long test alone.
function(surge_test name)
  cmake_parse_arguments(T "" "LABEL;COST" "SOURCES;DEPS" ${ARGN})
  if(NOT T_COST)
    set(T_COST 0)
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_DEPS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    SURGE_SOURCE_DIR="${PROJECT_SOURCE_DIR}" SURGE_BINARY_DIR="${PROJECT_BINARY_DIR}")
  # Sanitizer builds: the test programs' own code leaves out UBSan's null and alignment checks.
  # GCC emits them as one check on every pointer access, and in test code (which drives the
  # libraries, whose code keeps every check) they made up about a third of the test programs'
  # compile time under asan. A null dereference there still stops the test (AddressSanitizer
  # reports the SEGV with its stack).
  if(SURGE_SANITIZE)
    target_compile_options(${name} PRIVATE -fno-sanitize=null,alignment)
  endif()
  # Optimised builds compile the test programs' own code at -O1: it drives the libraries (which
  # keep -O3) and checks their results, and -O3 took about 40 % longer to compile it. The GPU
  # tests keep -O3: their reference checks run large loops in the test code itself.
  if(CMAKE_BUILD_TYPE STREQUAL "Release" AND NOT T_LABEL STREQUAL "gpu")
    target_compile_options(${name} PRIVATE -O1)
  endif()
  gtest_discover_tests(${name} PROPERTIES LABELS "${T_LABEL}" COST ${T_COST} DISCOVERY_TIMEOUT 60)
endfunction()
