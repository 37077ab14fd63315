// The driver hooks' table at run time: exported names, one real-function slot per entry, and which loaded
// object is libcuda. Parts of this run inside dlsym (any thread, possibly inside the loader, possibly before
// our constructors): those use only constant-initialized data and atomics, take no lock of ours and never
// allocate. The paths that dlopen (driver_real, driver_hook_for_real) are reached only from the wrappers.
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "interpose/driver_hook_table.h"
#include "recorder/cache_hints.h"
#include "schema/environment.h"

namespace gmt::interpose {
namespace {

constexpr const char* kNames[] = {
#define GMT_DRIVER_NAME(name, ...) #name,
    GMT_DRIVER_HOOKS(GMT_DRIVER_NAME) GMT_DRIVER_CALLS(GMT_DRIVER_NAME)
#undef GMT_DRIVER_NAME
};
constexpr int kCount = static_cast<int>(DriverFn::Count);
static_assert(sizeof(kNames) / sizeof(kNames[0]) == kCount);

// All constant-initialized (zero): valid before any constructor runs.
std::atomic<void*> g_libcuda{nullptr};     // our own reference to libcuda, never closed (see libcuda_handle)
std::atomic<uintptr_t> g_libcuda_base{0};  // dli_fbase of libcuda, once known
std::atomic<bool> g_all_resolved{false};
std::atomic<int> g_debug{-1};  // -1: not read yet

bool has_libcuda_name(const char* path) {
  if (!path) return false;
  const char* slash = std::strrchr(path, '/');
  const char* base = slash ? slash + 1 : path;
  return std::strncmp(base, "libcuda.so", 10) == 0;
}

void remember_libcuda_base(const void* address_in_libcuda) {
  Dl_info info;
  if (!address_in_libcuda || !dladdr(address_in_libcuda, &info) || !info.dli_fbase) return;
  uintptr_t expected = 0;
  g_libcuda_base.compare_exchange_strong(expected, reinterpret_cast<uintptr_t>(info.dli_fbase),
                                         std::memory_order_acq_rel);
}

void* libcuda_handle() {
  if (void* handle = g_libcuda.load(std::memory_order_acquire)) return handle;
  if (g_no_driver.load(std::memory_order_relaxed)) return nullptr;
  // Normally cudart or the app's -lcuda loaded it already. NODELETE keeps libcuda mapped for as long as we
  // hold pointers into it: an app's dlclose cannot unload it under us.
  void* handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
  // Not loaded yet: a wrapper ran through our exported symbol before anything loaded the driver (e.g. an
  // app probing dlsym(RTLD_DEFAULT, "cuInit"), which finds our export first). Load it the way a runtime
  // would, privately: RTLD_GLOBAL would change what every later RTLD_DEFAULT lookup of the app finds.
  if (!handle) handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
  if (!handle) {
    g_no_driver.store(true, std::memory_order_relaxed);
    return nullptr;
  }
  void* expected = nullptr;
  // A racing thread that lost keeps its extra reference: harmless, libcuda is never unloaded anyway.
  if (!g_libcuda.compare_exchange_strong(expected, handle, std::memory_order_acq_rel)) return expected;
  if (DlsymFn lookup = real_dlsym()) remember_libcuda_base(lookup(handle, "cuInit"));
  return handle;
}

}  // namespace

int driver_hook_index(const char* symbol) {
  // Every dlsym of the process passes here: reject anything not starting with "cu" at once.
  if (!symbol || symbol[0] != 'c' || symbol[1] != 'u') return -1;
  for (int i = 0; i < kDriverHookCount; ++i) {
    if (std::strcmp(kNames[i], symbol) == 0) return i;
  }
  return -1;
}

const char* driver_hook_name(int index) { return index >= 0 && index < kCount ? kNames[index] : "?"; }

std::atomic<bool> g_no_driver{false};
std::atomic<void*> g_driver_real[static_cast<size_t>(DriverFn::Count)];

void* find_driver_real(DriverFn fn) {
  auto index = static_cast<int>(fn);
  if (void* real = g_driver_real[index].load(std::memory_order_acquire)) return real;
  void* handle = libcuda_handle();
  DlsymFn lookup = real_dlsym();
  if (!handle || !lookup) return nullptr;
  // An explicit handle searches libcuda itself first: this is libcuda's definition, never our export.
  void* real = lookup(handle, kNames[index]);
  if (!real) return nullptr;  // an older driver without this function; only our export can lead here
  void* expected = nullptr;
  if (!g_driver_real[index].compare_exchange_strong(expected, real, std::memory_order_acq_rel)) return expected;
  return real;
}

void note_driver_real(int index, void* real) {
  if (index < 0 || index >= kDriverHookCount || !real) return;
  // First one wins: a later lookup in the same libcuda finds the same address.
  void* expected = nullptr;
  g_driver_real[index].compare_exchange_strong(expected, real, std::memory_order_acq_rel);
}

int driver_hook_for_real(void* real) {
  if (!real) return -1;
  // Once: resolve every entry by its exported name, so that any versioned answer of cuGetProcAddress can be
  // matched by address. Racing threads resolve the same addresses.
  if (!g_all_resolved.load(std::memory_order_acquire) && libcuda_handle()) {
    for (int i = 0; i < kDriverHookCount; ++i) driver_real(static_cast<DriverFn>(i));
    g_all_resolved.store(true, std::memory_order_release);
  }
  for (int i = 0; i < kDriverHookCount; ++i) {
    if (g_driver_real[i].load(std::memory_order_acquire) == real) return i;
  }
  return -1;
}

bool is_in_libcuda(const void* address) {
  Dl_info info;
  if (!address || !dladdr(address, &info) || !info.dli_fbase) return false;
  auto object_base = reinterpret_cast<uintptr_t>(info.dli_fbase);
  if (uintptr_t base = g_libcuda_base.load(std::memory_order_acquire)) return object_base == base;
  // Before any wrapper ran (cudart's first dlsym of cuGetProcAddress_v2 comes before every driver call) we
  // cannot search for libcuda.so.1 here (a search opens files and allocates), so recognize the driver by its
  // file name: the loader found it as libcuda.so.1 (or the libcuda.so link to it).
  if (!has_libcuda_name(info.dli_fname)) return false;
  uintptr_t expected = 0;
  if (!g_libcuda_base.compare_exchange_strong(expected, object_base, std::memory_order_acq_rel)) {
    return expected == object_base;
  }
  // Once: pin it. We are about to hold pointers into it, and a probe that dlopens the driver, looks a name up
  // and dlcloses it would otherwise leave them dangling. NOLOAD by the exact loaded name only finds the
  // object (no search); NODELETE keeps it mapped for good, as the driver expects anyway.
  dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
  return true;
}

bool driver_debug_enabled() {
  int enabled = g_debug.load(std::memory_order_relaxed);
  if (enabled < 0) {
    const char* value = std::getenv(schema::env::kDebugDriverHooks);  // getenv neither allocates nor locks
    enabled = value && *value && std::strcmp(value, "0") != 0 ? 1 : 0;
    g_debug.store(enabled, std::memory_order_relaxed);
  }
  return enabled == 1;
}

void driver_debug(const char* format, ...) {
  char line[512];
  int prefix = std::snprintf(line, sizeof(line), "gpumemtrace[hooks]: ");
  va_list args;
  va_start(args, format);
  int body = std::vsnprintf(line + prefix, sizeof(line) - prefix - 1, format, args);
  va_end(args);
  size_t length = prefix + (body < 0 ? 0 : static_cast<size_t>(body));
  if (length > sizeof(line) - 2) length = sizeof(line) - 2;
  line[length++] = '\n';
  ssize_t ignored = write(STDERR_FILENO, line, length);
  (void)ignored;
}

}  // namespace gmt::interpose
