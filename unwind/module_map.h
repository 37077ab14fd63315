// The loaded objects of the process (path, load bias, extent, build-id), so that raw PCs can be symbolized
// after the run, against the right file. Read with dl_iterate_phdr by the writer thread with each batch, and by
// our dlclose before a module goes (keep_before_unload), never by an allocation hook.
#pragma once

#include <cstdint>
#include <mutex>
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
// Thread-safe: the writer scans with each batch, an app thread in dlclose scans before the unmap.
class ModuleMap {
 public:
  // The modules not handed out before: those kept by keep_before_unload, then those loaded now.
  std::vector<Module> scan_new_modules();
  // A module about to be unloaded may have been loaded after the writer's last scan (its batches come every
  // 200 ms): its allocations' stacks point into it, so it is read now and kept for the next scan_new_modules.
  void keep_before_unload();

 private:
  std::vector<Module> scan_locked();
  std::mutex mutex_;
  std::set<std::pair<std::string, uintptr_t>> seen_;  // under mutex_
  std::vector<Module> kept_;                          // under mutex_: read by keep_before_unload, not handed out
};

}  // namespace gmt::unwind
