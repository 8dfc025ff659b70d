# cmake -DROOT=<source dir> [-DFILES="a;b"] -P cmake/check_layers.cmake
#
# The layers, bottom to top:
#   partitioning <- runtime <- operators <- api <- tools, examples, bench, tests
# A file in one layer may include headers of its own layer and of the layers
# below it, never above.  Exits with an error naming every wrong-way include
# (file:line and what it includes).  Run by the build before every layer
# library (target tidemark_layer_check) and by ctest (layering_check).
cmake_minimum_required(VERSION 3.25)
set(_layers partitioning runtime operators api)

function(_layer_rank path out)
  set(rank -1)
  set(i 0)
  foreach(l ${_layers})
    if(path MATCHES "^${l}/")
      set(rank ${i})
    endif()
    math(EXPR i "${i} + 1")
  endforeach()
  set(${out} ${rank} PARENT_SCOPE)
endfunction()

if(NOT DEFINED FILES)
  set(FILES "")
  foreach(l ${_layers})
    file(GLOB_RECURSE _f RELATIVE ${ROOT} ${ROOT}/${l}/*.h ${ROOT}/${l}/*.cc)
    list(APPEND FILES ${_f})
  endforeach()
endif()

set(_errors "")
foreach(f ${FILES})
  _layer_rank("${f}" own)
  if(own LESS 0)
    continue()
  endif()
  file(STRINGS ${ROOT}/${f} _lines)
  set(n 0)
  foreach(line IN LISTS _lines)
    math(EXPR n "${n} + 1")
    if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\"")
      set(inc "${CMAKE_MATCH_1}")
      _layer_rank("${inc}" target)
      if(target GREATER own)
        list(GET _layers ${own} own_name)
        list(GET _layers ${target} target_name)
        string(APPEND _errors
          "  ${f}:${n}: includes \"${inc}\": ${own_name}/ may not depend on ${target_name}/\n")
      endif()
    endif()
  endforeach()
endforeach()

if(_errors)
  message(FATAL_ERROR "wrong-way includes (layers: partitioning <- runtime <- operators <- api):\n${_errors}")
endif()
