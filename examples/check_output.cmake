# Runs an example program and compares what it prints with an expected file:
#   cmake -DPROGRAM=<exe> -DARGS=<;-list> -DEXPECTED=<file> [-DIGNORE=<regex>] -P check_output.cmake
# The lines are compared as a multiset: the trace lines (printed by the
# watermark generator's subtask) and the results (printed by the window's)
# come from different threads, so their interleaving varies; the order within
# each stream is checked by tests/scenarios_test.cc.  Lines matching IGNORE
# (e.g. ones carrying a thread id) are left out.
execute_process(COMMAND ${PROGRAM} ${ARGS}
                OUTPUT_VARIABLE actual ERROR_VARIABLE errors RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} exited with ${rc}:\n${errors}")
endif()
file(READ ${EXPECTED} expected)

function(sorted_lines text out)
  string(REGEX REPLACE "\n$" "" text "${text}")
  # Protect characters that CMake lists treat specially.
  string(REPLACE ";" "<semicolon>" text "${text}")
  string(REPLACE "[" "<lbracket>" text "${text}")
  string(REPLACE "]" "<rbracket>" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(kept "")
  foreach(line IN LISTS lines)
    if(DEFINED IGNORE AND NOT IGNORE STREQUAL "")
      string(REPLACE "<lbracket>" "[" raw "${line}")
      string(REPLACE "<rbracket>" "]" raw "${raw}")
      if(raw MATCHES "${IGNORE}")
        continue()
      endif()
    endif()
    list(APPEND kept "${line}")
  endforeach()
  list(SORT kept)
  set(${out} "${kept}" PARENT_SCOPE)
endfunction()

sorted_lines("${actual}" actual_lines)
sorted_lines("${expected}" expected_lines)
if(NOT actual_lines STREQUAL expected_lines)
  message(FATAL_ERROR "output of ${PROGRAM} ${ARGS} differs from ${EXPECTED}.\n"
                      "--- printed:\n${actual}\n--- stderr:\n${errors}")
endif()
