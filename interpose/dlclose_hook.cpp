// Our dlclose: the app (or a library) unloading code means that other code can later be mapped at the same
// addresses, and the stack walker's rules by code address (unwind/fast_unwind.h) would then describe the
// wrong function. So after every dlclose the walker forgets its rules and reads them again from .eh_frame as
// stacks need them. Before it, the loaded modules are read (recorder::keep_modules_before_unload): a plugin
// loaded, used and unloaded within one of the writer's 200 ms batches would otherwise never be in the trace's
// modules, and its allocations' frames would have no function. dlclose is rare (Python never unloads extension
// modules): one dl_iterate_phdr per call, and a few reads of unwind information for the next stacks.
#include <dlfcn.h>

#include <atomic>

#include "interpose/driver_hook_table.h"
#include "recorder/recorder.h"
#include "unwind/fast_unwind.h"

namespace {

using DlcloseFn = int (*)(void*);
std::atomic<DlcloseFn> g_real_dlclose{nullptr};

DlcloseFn real_dlclose() {
  if (DlcloseFn real = g_real_dlclose.load(std::memory_order_acquire)) return real;
  gmt::interpose::DlsymFn dlsym_of_libc = gmt::interpose::real_dlsym();
  // RTLD_NEXT, asked from this library: the dlclose after ours (libc's, or another interposer's).
  auto real = dlsym_of_libc ? reinterpret_cast<DlcloseFn>(dlsym_of_libc(RTLD_NEXT, "dlclose")) : nullptr;
  if (real) g_real_dlclose.store(real, std::memory_order_release);
  return real;
}

}  // namespace

extern "C" int dlclose(void* handle) {
  DlcloseFn real = real_dlclose();
  if (!real) return -1;  // never seen: glibc always has one
  gmt::recorder::keep_modules_before_unload();
  int result = real(handle);
  gmt::unwind::forget_unwind_rules();  // after the unmap: rules read from now on are of what is mapped now
  return result;
}
