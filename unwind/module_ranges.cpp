#include "unwind/module_ranges.h"

#include <algorithm>

namespace gmt::unwind {
namespace {

ModuleRange range_of(const dl_phdr_info& info) {
  uintptr_t low = UINTPTR_MAX, high = 0;
  for (int i = 0; i < info.dlpi_phnum; ++i) {
    const auto& ph = info.dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    low = std::min<uintptr_t>(low, info.dlpi_addr + ph.p_vaddr);
    high = std::max<uintptr_t>(high, info.dlpi_addr + ph.p_vaddr + ph.p_memsz);
  }
  return low < high ? ModuleRange{low, high} : ModuleRange{};
}

struct Walk {
  ModuleVisitor visit;
  void* context;
};

}  // namespace

void for_each_module(ModuleVisitor visit, void* context) {
  Walk walk{visit, context};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        const auto& w = *static_cast<Walk*>(data);
        return w.visit(LoadedModule{info, range_of(*info)}, w.context) ? 1 : 0;
      },
      &walk);
}

ModuleRange module_range_containing(uintptr_t address) {
  ModuleRange found;
  for_each_module([&](const LoadedModule& module) {
    if (!module.range.contains(address)) return false;
    found = module.range;
    return true;
  });
  return found;
}

}  // namespace gmt::unwind
