#include <dlfcn.h>

#include <atomic>
#include <initializer_list>

#include "interpose/hook_table.h"
#include "recorder/cache_hints.h"

namespace gmt::interpose {
namespace {

struct HookEntry {
  const char* name;
  bool optional;
};

constexpr HookEntry kHooks[] = {
#define GMT_HOOK_ENTRY(name, optional) {#name, optional},
    GMT_CUDART_HOOKS(GMT_HOOK_ENTRY)
#undef GMT_HOOK_ENTRY
};
static_assert(sizeof(kHooks) / sizeof(kHooks[0]) == static_cast<size_t>(HookId::Count));

void* resolve(const char* name) {
  if (void* p = dlsym(RTLD_NEXT, name)) return p;
  // A runtime loaded with RTLD_LOCAL is not in the global scope that RTLD_NEXT searches; ask it directly: CUDA 13's
  // or CUDA 12's (README, "Supported"; gpu.cuda12 loads a CUDA 12 library with RTLD_LOCAL).
  for (const char* soname : {"libcudart.so.13", "libcudart.so.12"}) {
    if (void* cudart = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD)) {
      void* p = dlsym(cudart, name);
      dlclose(cudart);
      if (p) return p;
    }
  }
  return nullptr;
}

}  // namespace

std::atomic<void*> g_real_functions[static_cast<size_t>(HookId::Count)];

void* find_real_function(HookId id) {
  auto index = static_cast<size_t>(id);
  // Racing threads resolve the same address; whichever stores last stores the same value.
  void* p = resolve(kHooks[index].name);
  g_real_functions[index].store(p, std::memory_order_release);
  return p;
}

}  // namespace gmt::interpose
