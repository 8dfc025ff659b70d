# cmake -DINCLUDE_DIR=<prefix>/include -DSOURCE_ROOT=<source dir>
#       -P cmake/check_installed_headers.cmake
#
# The install tree holds exactly the headers a user reaches from its entry
# points, <tidemark/tidemark.h> and the test harness <tidemark/testing/*.h>:
# follows the #includes of tidemark/... from INCLUDE_DIR/tidemark/tidemark.h
# and fails naming every header that is reached but not installed (it exists
# in SOURCE_ROOT but not under INCLUDE_DIR), and every installed header that
# is never reached.  Includes found in neither tree (absl, the standard
# library) are not ours and are skipped.  INCLUDE_DIR is the include root
# (the prefix's include/), never include/tidemark.  Run by find_package_test
# on the install tree it makes; TIDEMARK_PUBLIC_HEADERS in CMakeLists.txt is
# the list this keeps honest.
cmake_minimum_required(VERSION 3.25)
foreach(var INCLUDE_DIR SOURCE_ROOT)
  if(NOT ${var})
    message(FATAL_ERROR "${var} is required")
  endif()
endforeach()
if(NOT EXISTS "${INCLUDE_DIR}/tidemark/tidemark.h")
  message(FATAL_ERROR "${INCLUDE_DIR}/tidemark/tidemark.h is not installed")
endif()

# The source file an include names: tidemark/testing/X is api/testing/X,
# tidemark/X is X.
function(_source_of inc out)
  if(inc MATCHES "^tidemark/testing/(.*)$")
    set(${out} "api/testing/${CMAKE_MATCH_1}" PARENT_SCOPE)
  elseif(inc MATCHES "^tidemark/(.*)$")
    set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

set(_reached "")
set(_missing "")
file(GLOB_RECURSE _testing RELATIVE "${INCLUDE_DIR}" "${INCLUDE_DIR}/tidemark/testing/*.h")
set(_todo tidemark/tidemark.h ${_testing})
while(_todo)
  list(POP_FRONT _todo h)
  if(h IN_LIST _reached)
    continue()
  endif()
  list(APPEND _reached ${h})
  file(STRINGS "${INCLUDE_DIR}/${h}" _lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]tidemark/")
  foreach(line IN LISTS _lines)
    if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*[\"<](tidemark/[^\">]+)[\">]")
      set(inc "${CMAKE_MATCH_1}")
      _source_of("${inc}" src)
      if(EXISTS "${INCLUDE_DIR}/${inc}")
        list(APPEND _todo ${inc})
      elseif(src AND EXISTS "${SOURCE_ROOT}/${src}")
        string(APPEND _missing "  ${inc} (included by ${h})\n")
      endif()
    endif()
  endforeach()
endwhile()

file(GLOB_RECURSE _installed RELATIVE "${INCLUDE_DIR}" "${INCLUDE_DIR}/tidemark/*")
set(_extra "")
foreach(f IN LISTS _installed)
  if(NOT f IN_LIST _reached)
    string(APPEND _extra "  ${f}\n")
  endif()
endforeach()

set(_errors "")
if(_missing)
  string(APPEND _errors "reached from tidemark/tidemark.h but not installed:\n${_missing}")
endif()
if(_extra)
  string(APPEND _errors "installed but not reached from tidemark/tidemark.h:\n${_extra}")
endif()
if(_errors)
  message(FATAL_ERROR "install tree ${INCLUDE_DIR} (fix TIDEMARK_PUBLIC_HEADERS in CMakeLists.txt):\n${_errors}")
endif()
list(LENGTH _reached n)
message(STATUS "installed headers: the ${n} reached from tidemark/tidemark.h, no others")
