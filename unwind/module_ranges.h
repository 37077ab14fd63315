// The loaded objects of the process as the loader lists them (dl_iterate_phdr), and where each one lies: the one
// walk of the module list for every part that needs it (the stack cut, recorder/stacks.cpp; the Python frame walk;
// the .eh_frame reader; the module map the writer records).
#pragma once

#include <link.h>

#include <cstdint>
#include <type_traits>

namespace gmt::unwind {

// Where a module lies in memory: from the lowest address of its PT_LOAD segments to the end of the highest. Empty
// (0, 0) for an object without one.
struct ModuleRange {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  bool contains(uintptr_t address) const { return address >= begin && address < end; }
  bool empty() const { return begin >= end; }
};

// One loaded object: the loader's entry (name, load bias, program headers) and its range.
struct LoadedModule {
  const dl_phdr_info* info;
  ModuleRange range;
};

// Calls `visit(module)` for every loaded object, in the loader's order (the program first), until it returns true.
// `visit` runs inside dl_iterate_phdr, with the loader's lock held: it must not dlopen, dlclose or call dlsym.
using ModuleVisitor = bool (*)(const LoadedModule& module, void* context);
void for_each_module(ModuleVisitor visit, void* context);

template <typename Visit>
void for_each_module(Visit&& visit) {
  using VisitType = std::remove_reference_t<Visit>;
  for_each_module([](const LoadedModule& module, void* context) { return (*static_cast<VisitType*>(context))(module); },
                  &visit);
}

// The range of the module that holds `address` (e.g. the base dladdr reports for an address inside it); empty when
// no module does.
ModuleRange module_range_containing(uintptr_t address);

}  // namespace gmt::unwind
