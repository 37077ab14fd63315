// Where the CLI finds the files it ships with, relative to its own executable, so that the build tree and an
// installed tree work alike (bin/gpumemtrace next to lib/gpumemtrace/).
#pragma once

#include <string>

namespace gmt::cli {

struct InstallLayout {
  std::string preload_library;        // .../lib/gpumemtrace/libgpumemtrace.so
  std::string simulated_runtime_dir;  // .../lib/gpumemtrace/sim (holds libcudart.so.13)
  std::string python_dir;             // .../lib/gpumemtrace/python (sitecustomize.py + gpumemtrace_inprocess/)
};

InstallLayout find_install_layout();

}  // namespace gmt::cli
