# Writes the Python form of schema/environment.h: one constant per GMT_* name (kTorchBlocks -> TORCH_BLOCKS), for
# the in-process Python package (python/gpumemtrace_inprocess/environment.py, checked in so that the package also
# runs from the source tree).
#
#   cmake -DHEADER=schema/environment.h -DPYTHON=python/gpumemtrace_inprocess/environment.py -P <this file>
#       writes the module;
#   the same with -DCHECK=ON fails, naming the command above, when the module differs from what it would write
#       (the build runs this, and so does ctest's unit.python_environment_names).
cmake_minimum_required(VERSION 3.20)
if(NOT HEADER OR NOT PYTHON)
  message(FATAL_ERROR "usage: cmake -DHEADER=<environment.h> -DPYTHON=<environment.py> [-DCHECK=ON] "
                      "-P ${CMAKE_CURRENT_LIST_FILE}")
endif()

file(STRINGS ${HEADER} lines REGEX "^inline constexpr const char\\* k[A-Za-z0-9]+ = \"GMT_[A-Z0-9_]+\";")
set(body "")
set(count 0)
foreach(line IN LISTS lines)
  string(REGEX MATCH "k([A-Za-z0-9]+) = \"(GMT_[A-Z0-9_]+)\"" matched "${line}")
  set(camel ${CMAKE_MATCH_1})
  set(value ${CMAKE_MATCH_2})
  string(REGEX REPLACE "([a-z0-9])([A-Z])" "\\1_\\2" snake "${camel}")
  string(TOUPPER "${snake}" constant)
  # The constant must spell the variable's own name less its GMT_ prefix: a name that does not is a typo in the
  # header, caught here rather than at run time.
  if(NOT "GMT_${constant}" STREQUAL "${value}")
    message(FATAL_ERROR "${HEADER}: k${camel} names ${value}, expected GMT_${constant}")
  endif()
  string(APPEND body "${constant} = \"${value}\"\n")
  math(EXPR count "${count} + 1")
endforeach()
if(count EQUAL 0)
  message(FATAL_ERROR "${HEADER}: no GMT_* names found")
endif()

set(text "\"\"\"Every GMT_* environment variable, by name: generated from schema/environment.h by
schema/environment_to_python.cmake. Do not edit: change the header and run, from the source tree,
    cmake -DHEADER=schema/environment.h -DPYTHON=python/gpumemtrace_inprocess/environment.py \\
          -P schema/environment_to_python.cmake
\"\"\"
${body}")

if(CHECK)
  set(current "")
  if(EXISTS ${PYTHON})
    file(READ ${PYTHON} current)
  endif()
  if(NOT current STREQUAL text)
    message(FATAL_ERROR "${PYTHON} is not what ${HEADER} makes of it; from the source tree, run\n"
                        "  cmake -DHEADER=schema/environment.h -DPYTHON=python/gpumemtrace_inprocess/environment.py "
                        "-P schema/environment_to_python.cmake")
  endif()
else()
  file(WRITE ${PYTHON} "${text}")
endif()
