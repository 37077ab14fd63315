// The loaded objects of the process (path, load bias, extent, build-id), so that raw PCs can be symbolized
// after the run, against the right file. Read with dl_iterate_phdr by the writer thread, never by a hook.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gmt::unwind {

struct Module {
  std::string path;
  uintptr_t base = 0;    // dlpi_addr: the load bias
  uintptr_t size = 0;    // from base to the end of the highest PT_LOAD segment
  std::string build_id;  // hex, empty when none
};

// Remembers which modules were already reported, so each flush only hands out new ones (dlopen'ed later).
class ModuleMap {
 public:
  std::vector<Module> scan_new_modules();
  void forget_all() { seen_.clear(); }

 private:
  std::set<std::pair<std::string, uintptr_t>> seen_;
};

}  // namespace gmt::unwind
