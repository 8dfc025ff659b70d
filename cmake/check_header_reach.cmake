# cmake -DCXX=<compiler> -DINCLUDE_ROOT=<dir holding tidemark/> -DWORK_DIR=<dir>
#       -DMAX_LINES=<n> -P cmake/check_header_reach.cmake
#
# Keeps the reach of <tidemark/tidemark.h> from growing silently (issue 24):
# preprocesses a translation unit holding only that include (-std=c++20) and
# fails when it has more than MAX_LINES lines of code (linemarkers and blank
# lines not counted: what the compiler parses, tidemark's headers and every
# header they reach).  Run by ctest (tidemark_h_reach); the ceiling is in
# tests/CMakeLists.txt, a little above the figure of the day: raise it only
# with a reason, and record the compile cost (bench/compile_cost.sh) in
# bench/RESULTS.md.
cmake_minimum_required(VERSION 3.25)
foreach(var CXX INCLUDE_ROOT WORK_DIR MAX_LINES)
  if(NOT ${var})
    message(FATAL_ERROR "${var} is required")
  endif()
endforeach()
file(MAKE_DIRECTORY "${WORK_DIR}")
file(WRITE "${WORK_DIR}/reach.cc" "#include <tidemark/tidemark.h>\n")
execute_process(COMMAND "${CXX}" -std=c++20 -E -P "-I${INCLUDE_ROOT}" "${WORK_DIR}/reach.cc"
  OUTPUT_FILE "${WORK_DIR}/reach.ii" RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "preprocessing <tidemark/tidemark.h> failed:\n${err}")
endif()
file(STRINGS "${WORK_DIR}/reach.ii" lines REGEX "[^ \t]")
list(LENGTH lines n)
if(n GREATER MAX_LINES)
  message(FATAL_ERROR "<tidemark/tidemark.h> reaches ${n} lines of code, more than the ceiling "
    "${MAX_LINES}: move heavy includes into .cc files or forward-declare (docs/architecture.md)")
endif()
message(STATUS "<tidemark/tidemark.h> reaches ${n} lines of code (ceiling ${MAX_LINES})")
