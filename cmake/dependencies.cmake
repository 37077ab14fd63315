# Finds every library the build needs, and stops with ONE message that names all the missing ones and the Debian
# packages that provide them (scripts/install-deps.sh build installs them all), rather than CMake's error for the
# first one only. `pip install .` shows this message too. Included by the top level before any target.
set(GMT_MISSING "")           # what is missing, in words
set(GMT_MISSING_DEBIAN "")    # the Debian packages that provide it
macro(gmt_require found what)
  if(NOT ${found})
    list(APPEND GMT_MISSING "${what}")
    list(APPEND GMT_MISSING_DEBIAN ${ARGN})
  endif()
endmacro()

find_package(SQLite3 QUIET)
gmt_require(SQLite3_FOUND "SQLite 3 (sqlite3.h)" libsqlite3-dev)
find_package(fmt QUIET)
gmt_require(fmt_FOUND "fmt" libfmt-dev)
find_package(nlohmann_json QUIET)
gmt_require(nlohmann_json_FOUND "nlohmann-json" nlohmann-json3-dev)
find_package(Threads REQUIRED)  # part of the C library
find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp)
gmt_require(CLI11_INCLUDE_DIR "CLI11 (CLI/CLI.hpp)" libcli11-dev)

# libunwind (stack capture in the app) and elfutils' libdw (symbolization after the run), found directly rather
# than through pkg-config, so that a private prefix (CMAKE_PREFIX_PATH) is enough on machines without the Debian
# packages (scripts/gpu-suite.sh).
find_path(LIBUNWIND_INCLUDE_DIR libunwind.h)
find_library(LIBUNWIND_LIBRARY NAMES unwind)
gmt_require(LIBUNWIND_INCLUDE_DIR "libunwind (libunwind.h)" libunwind-dev)
gmt_require(LIBUNWIND_LIBRARY "libunwind (libunwind.so)" libunwind-dev)
find_path(LIBDW_INCLUDE_DIR elfutils/libdwfl.h)
find_library(LIBDW_LIBRARY NAMES dw)
find_library(LIBELF_LIBRARY NAMES elf)
gmt_require(LIBDW_INCLUDE_DIR "elfutils' libdw (elfutils/libdwfl.h)" libdw-dev)
gmt_require(LIBDW_LIBRARY "elfutils' libdw (libdw.so)" libdw-dev)
gmt_require(LIBELF_LIBRARY "elfutils' libelf (libelf.so)" libelf-dev)

# The CUDA toolkit is no Debian package: its headers (cuda_runtime_api.h, CUPTI's, NVTX 3) are needed; nvcc only for
# the CUDA samples and benchmarks (GMT_CUDA_PROGRAMS).
find_package(CUDAToolkit QUIET)
set(GMT_CUDA_MISSING "")
if(NOT CUDAToolkit_FOUND)
  set(GMT_CUDA_MISSING "the CUDA toolkit (headers and CUPTI; it is not a Debian package: install CUDA 13 and put "
                       "nvcc on PATH, or set CUDAToolkit_ROOT)")
elseif(GMT_CUDA_PROGRAMS)
  include(CheckLanguage)
  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    set(GMT_CUDA_MISSING "nvcc, for the CUDA samples and tests (put the toolkit's bin/ on PATH, or configure with "
                         "-DGMT_CUDA_PROGRAMS=OFF -DBUILD_TESTING=OFF to build the profiler alone)")
  endif()
endif()
if(BUILD_TESTING)
  find_package(GTest QUIET)
  gmt_require(GTest_FOUND "GoogleTest, for the tests (or configure with -DBUILD_TESTING=OFF)" libgtest-dev)
endif()

if(GMT_MISSING OR GMT_CUDA_MISSING)
  set(lines "gpumemtrace cannot be built; missing:")
  list(REMOVE_DUPLICATES GMT_MISSING)
  foreach(what IN LISTS GMT_MISSING)
    string(APPEND lines "\n  - ${what}")
  endforeach()
  if(GMT_CUDA_MISSING)
    string(APPEND lines "\n  - ${GMT_CUDA_MISSING}")
  endif()
  if(GMT_MISSING_DEBIAN)
    list(REMOVE_DUPLICATES GMT_MISSING_DEBIAN)
    list(JOIN GMT_MISSING_DEBIAN " " debian)
    string(APPEND lines "\nOn Debian or Ubuntu: sudo apt-get install ${debian}"
                        "\n  (or scripts/install-deps.sh build, which installs everything the build needs)")
  endif()
  message(FATAL_ERROR "${lines}")
endif()

add_library(gmt::libunwind INTERFACE IMPORTED)
target_include_directories(gmt::libunwind INTERFACE ${LIBUNWIND_INCLUDE_DIR})
target_link_libraries(gmt::libunwind INTERFACE ${LIBUNWIND_LIBRARY})
add_library(gmt::libdw INTERFACE IMPORTED)
target_include_directories(gmt::libdw INTERFACE ${LIBDW_INCLUDE_DIR})
target_link_libraries(gmt::libdw INTERFACE ${LIBDW_LIBRARY} ${LIBELF_LIBRARY})
