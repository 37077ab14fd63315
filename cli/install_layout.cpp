#include "cli/install_layout.h"

#include <unistd.h>
#include <climits>

namespace gmt::cli {

InstallLayout find_install_layout() {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  std::string exe = n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string("./gpumemtrace");
  std::string bin_dir = exe.substr(0, exe.rfind('/'));
  std::string lib_dir = bin_dir + "/../" GMT_LIBDIR;
  char resolved[PATH_MAX];
  if (realpath(lib_dir.c_str(), resolved)) lib_dir = resolved;
  return InstallLayout{lib_dir + "/libgpumemtrace.so", lib_dir + "/sim", lib_dir + "/python"};
}

}  // namespace gmt::cli
