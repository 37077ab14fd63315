#include "interpose/hooks_reach.h"

#include <dlfcn.h>

#include "interpose/driver_hook_table.h"

namespace gmt::interpose {
namespace {

// A driver function every libcuda exports and the hooks wrap (driver_hook_table.h).
constexpr const char* kProbeFunction = "cuMemAlloc_v2";

// The base address of the object that holds `address` (0 when none), and its file name.
uintptr_t object_of(const void* address, std::string* path) {
  Dl_info info;
  if (!address || !dladdr(address, &info) || !info.dli_fbase) return 0;
  if (path && info.dli_fname) *path = info.dli_fname;
  return reinterpret_cast<uintptr_t>(info.dli_fbase);
}

}  // namespace

HooksReachFacts probe_hooks_reach() {
  HooksReachFacts facts;
  DlsymFn libc_dlsym = real_dlsym();
  if (!libc_dlsym) return facts;
  // RTLD_DEFAULT: the first "dlsym" of the process's global scope, which every caller outside us binds to.
  void* process_dlsym = libc_dlsym(RTLD_DEFAULT, "dlsym");
  const uintptr_t owner = object_of(process_dlsym, &facts.dlsym_owner);
  facts.dlsym_is_ours = owner != 0 && owner == object_of(reinterpret_cast<void*>(&probe_hooks_reach), nullptr);
  if (!process_dlsym) return facts;

  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!driver) driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!driver) return facts;
  const int index = driver_hook_index(kProbeFunction);
  void* found = reinterpret_cast<DlsymFn>(process_dlsym)(driver, kProbeFunction);
  facts.wrapper_handed_out = found != nullptr && index >= 0 && found == driver_wrapper(index);
  // Our dlsym pinned libcuda (RTLD_NODELETE) if it handed out the wrapper: the pointer stays valid either way.
  dlclose(driver);
  return facts;
}

}  // namespace gmt::interpose
