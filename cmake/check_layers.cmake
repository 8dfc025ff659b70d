# cmake -DROOT=<source dir> [-DFILES="a;b"] -P cmake/check_layers.cmake
#
# The layers, and the planes of the runtime, bottom to top:
#   partitioning <- runtime/core <- runtime/state <- runtime/io <- runtime/task
#     <- runtime/exec <- operators <- api <- tools, examples, bench, tests
# and the MPI plane runtime/cluster, which stands on runtime/exec and which no
# other layer includes (a one-process job never reaches MPI), and the RocksDB
# plane runtime/rocksdb, which stands on runtime/state and which no other
# layer includes either.
# A file may include headers of its own layer and of the layers below it,
# never above; every file of runtime/ must be in a plane.  Includes name
# library headers as "tidemark/<path>" ("tidemark/testing/..." is
# api/testing/).  Exits with an error naming every wrong-way include
# (file:line and what it includes).  Run by the build before every layer
# library (target tidemark_layer_check) and by ctest (layering_check).
cmake_minimum_required(VERSION 3.25)
set(_layers partitioning runtime/core runtime/state runtime/io runtime/task runtime/exec
  runtime/cluster runtime/rocksdb operators api)
# Layers that only their own files may include.
set(_plugins runtime/cluster runtime/rocksdb)

# The layer of a path relative to the source root (-1: none).
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

# The source path an include names ("tidemark/runtime/core/time.h" ->
# runtime/core/time.h); a path without the prefix is kept as written.
function(_source_path inc out)
  if(inc MATCHES "^tidemark/testing/(.*)$")
    set(inc "api/testing/${CMAKE_MATCH_1}")
  elseif(inc MATCHES "^tidemark/(.*)$")
    set(inc "${CMAKE_MATCH_1}")
  endif()
  set(${out} "${inc}" PARENT_SCOPE)
endfunction()

set(_errors "")
if(NOT DEFINED FILES)
  set(FILES "")
  foreach(l partitioning runtime operators api)
    file(GLOB_RECURSE _f RELATIVE ${ROOT} ${ROOT}/${l}/*.h ${ROOT}/${l}/*.cc)
    list(APPEND FILES ${_f})
  endforeach()
endif()

foreach(f ${FILES})
  _layer_rank("${f}" own)
  if(own LESS 0)
    if(f MATCHES "^runtime/")
      string(APPEND _errors "  ${f}: in no plane of the runtime (runtime/<plane>/, see ${CMAKE_CURRENT_LIST_FILE})\n")
    endif()
    continue()
  endif()
  list(GET _layers ${own} own_name)
  file(STRINGS ${ROOT}/${f} _lines)
  set(n 0)
  foreach(line IN LISTS _lines)
    math(EXPR n "${n} + 1")
    if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*[\"<]([^\">]+)[\">]")
      set(inc "${CMAKE_MATCH_1}")
      _source_path("${inc}" src)
      _layer_rank("${src}" target)
      if(target LESS 0)
        continue()
      endif()
      list(GET _layers ${target} target_name)
      if(target GREATER own)
        string(APPEND _errors
          "  ${f}:${n}: includes \"${inc}\": ${own_name}/ may not depend on ${target_name}/\n")
      elseif(target_name IN_LIST _plugins AND NOT target EQUAL own)
        string(APPEND _errors
          "  ${f}:${n}: includes \"${inc}\": ${target_name}/ is included only by its own files\n")
      endif()
    endif()
  endforeach()
endforeach()

if(_errors)
  string(REPLACE ";" " <- " _order "${_layers}")
  message(FATAL_ERROR "wrong-way includes (layers: ${_order}):\n${_errors}")
endif()
