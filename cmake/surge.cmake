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
  gtest_discover_tests(${name} PROPERTIES LABELS "${T_LABEL}" COST ${T_COST} DISCOVERY_TIMEOUT 60)
endfunction()
