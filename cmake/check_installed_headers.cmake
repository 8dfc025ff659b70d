# cmake -DINCLUDE_DIR=<prefix>/include/tidemark -DSOURCE_ROOT=<source dir>
#       -P cmake/check_installed_headers.cmake
#
# The install tree holds exactly the headers a user's #include "tidemark.h"
# (or "api/testing/harness.h", the test harness, when installed) reaches:
# follows the quoted #includes from INCLUDE_DIR/tidemark.h and fails naming
# every header that is reached but not installed (it exists in SOURCE_ROOT but
# not under INCLUDE_DIR), and every installed header that tidemark.h never
# reaches.  Includes found in neither tree (absl, the
# standard library) are not ours and are skipped.  Run by find_package_test on
# the install tree it makes; TIDEMARK_PUBLIC_HEADERS in CMakeLists.txt is the
# list this keeps honest.
cmake_minimum_required(VERSION 3.25)
foreach(var INCLUDE_DIR SOURCE_ROOT)
  if(NOT ${var})
    message(FATAL_ERROR "${var} is required")
  endif()
endforeach()
if(NOT EXISTS "${INCLUDE_DIR}/tidemark.h")
  message(FATAL_ERROR "${INCLUDE_DIR}/tidemark.h is not installed")
endif()

set(_reached "")
set(_missing "")
set(_todo tidemark.h)
# The public test harness is a root of its own: tidemark.h does not include it.
if(EXISTS "${INCLUDE_DIR}/api/testing/harness.h")
  list(APPEND _todo api/testing/harness.h)
endif()
while(_todo)
  list(POP_FRONT _todo h)
  if(h IN_LIST _reached)
    continue()
  endif()
  list(APPEND _reached ${h})
  file(STRINGS "${INCLUDE_DIR}/${h}" _lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(line IN LISTS _lines)
    if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\"")
      set(inc "${CMAKE_MATCH_1}")
      if(EXISTS "${INCLUDE_DIR}/${inc}")
        list(APPEND _todo ${inc})
      elseif(EXISTS "${SOURCE_ROOT}/${inc}")
        string(APPEND _missing "  ${inc} (included by ${h})\n")
      endif()
    endif()
  endforeach()
endwhile()

file(GLOB_RECURSE _installed RELATIVE "${INCLUDE_DIR}" "${INCLUDE_DIR}/*")
set(_extra "")
foreach(f IN LISTS _installed)
  if(NOT f IN_LIST _reached)
    string(APPEND _extra "  ${f}\n")
  endif()
endforeach()

set(_errors "")
if(_missing)
  string(APPEND _errors "reached from tidemark.h but not installed:\n${_missing}")
endif()
if(_extra)
  string(APPEND _errors "installed but not reached from tidemark.h:\n${_extra}")
endif()
if(_errors)
  message(FATAL_ERROR "install tree ${INCLUDE_DIR} (fix TIDEMARK_PUBLIC_HEADERS in CMakeLists.txt):\n${_errors}")
endif()
list(LENGTH _reached n)
message(STATUS "installed headers: the ${n} reached from tidemark.h, no others")
