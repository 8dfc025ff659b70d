# Installs the tidemark build in BUILD_DIR into a fresh prefix under WORK_DIR,
# then configures, builds and runs the consumer project (SOURCE_DIR) against
# that install tree with find_package(tidemark).
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DPROJECT_ROOT=... [-DGENERATOR=...]
#         [-DBUILD_TYPE=...] [-DSANITIZE_FLAGS=...] -P run_find_package_test.cmake
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR PROJECT_ROOT)
  if(NOT ${var})
    message(FATAL_ERROR "${var} is required")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGV}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
# (`cmake --install` needs the whole build done: build first, then ctest.)
run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
# Exactly the headers tidemark.h reaches are installed (the consumer's build
# below compiles each of them on its own).
run(${CMAKE_COMMAND} "-DINCLUDE_DIR=${prefix}/include" "-DSOURCE_ROOT=${PROJECT_ROOT}"
    -P "${PROJECT_ROOT}/cmake/check_installed_headers.cmake")

set(gen_args)
if(GENERATOR)
  list(APPEND gen_args -G "${GENERATOR}")
endif()
if(NOT BUILD_TYPE)
  set(BUILD_TYPE Release)
endif()
run(${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}/build" ${gen_args}
    "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}"
    "-DCMAKE_CXX_FLAGS=${SANITIZE_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${SANITIZE_FLAGS}")
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
# consumer_pch: the same program with tidemark.h precompiled.
foreach(program consumer consumer_pch)
  run("${WORK_DIR}/build/${program}")
  # A one-process job neither links MPI nor gets its include paths.
  file(STRINGS "${WORK_DIR}/build/${program}" mpi_refs REGEX "libmpi")
  if(mpi_refs)
    message(FATAL_ERROR "${program} links MPI (${mpi_refs}); only tidemark::mpi may")
  endif()
endforeach()
file(GLOB_RECURSE ninja_files "${WORK_DIR}/build/*.ninja" "${WORK_DIR}/build/*flags.make")
foreach(f IN LISTS ninja_files)
  file(STRINGS "${f}" mpi_flags REGEX "openmpi|/mpi\\.h|-lmpi")
  if(mpi_flags)
    message(FATAL_ERROR "the consumer's compile or link lines name MPI (${f}): ${mpi_flags}")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
