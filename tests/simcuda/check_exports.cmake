# Compares the dynamic symbol table of the simulated libcudart.so.13 with the real one.
#   cmake -DSIM_LIB=... -DREAL_LIB=... -DOBJDUMP=... -P check_exports.cmake
# Fails unless every function the stand-in exports
#   - is also exported by the real library (no invented or misspelt entry points),
#   - carries the version node libcudart.so.13 (so cudaMalloc@libcudart.so.13 references bind),
# the entry points nvcc-generated code needs are all there, and the stand-in does not itself
# depend on a real libcudart.
cmake_minimum_required(VERSION 3.20)  # script mode: IN_LIST and friends need the modern policies

foreach(var SIM_LIB REAL_LIB OBJDUMP)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_exports.cmake: ${var} is not set")
  endif()
endforeach()

# Reads "name -> version node" for the defined functions in a library's dynamic symbol table.
function(read_exports lib out_names out_lines)
  execute_process(COMMAND ${OBJDUMP} -T ${lib} OUTPUT_VARIABLE dump RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "objdump -T ${lib} failed")
  endif()
  string(REPLACE "\n" ";" lines "${dump}")
  set(names "")
  set(kept "")
  foreach(line IN LISTS lines)
    # e.g. "0000000000050ad0 g    DF .text  00000000000001f5  libcudart.so.13 cudaMalloc"; the
    # version column is missing altogether for a library without symbol versions.
    if(line MATCHES "^[0-9a-f]+ g +DF \\.text[ \t]+[0-9a-f]+[ \t]+(([^ \t]+)[ \t]+)?([^ \t]+)$")
      set(version "${CMAKE_MATCH_2}")
      if(version STREQUAL "")
        set(version "(none)")
      endif()
      list(APPEND names "${CMAKE_MATCH_3}")
      list(APPEND kept "${CMAKE_MATCH_3} ${version}")
    endif()
  endforeach()
  set(${out_names} "${names}" PARENT_SCOPE)
  set(${out_lines} "${kept}" PARENT_SCOPE)
endfunction()

read_exports(${SIM_LIB} sim_names sim_lines)
read_exports(${REAL_LIB} real_names real_lines)
list(LENGTH sim_names sim_count)
list(LENGTH real_names real_count)
if(sim_count EQUAL 0 OR real_count EQUAL 0)
  message(FATAL_ERROR "no exported functions found (sim: ${sim_count}, real: ${real_count})")
endif()

set(problems "")
foreach(line IN LISTS sim_lines)
  string(REPLACE " " ";" fields "${line}")
  list(GET fields 0 name)
  list(GET fields 1 version)
  if(NOT name IN_LIST real_names)
    string(APPEND problems "  ${name}: not exported by the real libcudart.so.13\n")
  endif()
  if(NOT version STREQUAL "libcudart.so.13")
    string(APPEND problems "  ${name}: version node '${version}', expected libcudart.so.13\n")
  endif()
endforeach()

set(required
  cudaMalloc cudaFree cudaMallocAsync cudaMallocAsync_ptsz cudaFreeAsync_ptsz cudaMemcpy cudaMemcpy_ptds
  cudaGetDeviceProperties cudaGetErrorString cudaLaunchKernel
  __cudaRegisterFatBinary __cudaRegisterFatBinaryEnd __cudaUnregisterFatBinary __cudaRegisterFunction
  __cudaRegisterVar __cudaRegisterManagedVar __cudaInitModule __cudaPushCallConfiguration
  __cudaPopCallConfiguration __cudaGetKernel __cudaLaunchKernel __cudaLaunchKernel_ptsz)
foreach(name IN LISTS required)
  if(NOT name IN_LIST sim_names)
    string(APPEND problems "  ${name}: required but not exported\n")
  endif()
endforeach()

execute_process(COMMAND ${OBJDUMP} -p ${SIM_LIB} OUTPUT_VARIABLE headers)
if(headers MATCHES "NEEDED +libcudart")
  string(APPEND problems "  the stand-in depends on a real libcudart\n")
endif()
if(NOT headers MATCHES "SONAME +libcudart\\.so\\.13")
  string(APPEND problems "  soname is not libcudart.so.13\n")
endif()

if(problems)
  message(FATAL_ERROR "simulated cudart exports do not match the real library:\n${problems}")
endif()
message(STATUS "simulated cudart: ${sim_count} exports, all in the real library (${real_count}), all at libcudart.so.13")
