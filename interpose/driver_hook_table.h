// The table of wrapped CUDA driver entry points (the "hooks" backend, recorder/backend.h): the functions of the
// driver catalog (recorder/driver_catalog.h) and the few more the hooks need, in one list (docs/design.md, "Inside
// the process": hooks are thin, their list is one table). Each entry is the exact name libcuda exports: cuda.h
// #defines many plain names to versioned ones (cuMemAlloc -> cuMemAlloc_v2), and cudart asks cuGetProcAddress for
// plain names, so the table holds what the driver really exports and the wrappers are matched to the driver's
// answers by address (driver_table.cpp), never by guessing versions.
//
// How the app reaches a wrapper:
//   - by the exported symbol (an app linked with -lcuda; the library is preloaded, so it is found first);
//   - by dlsym on a handle whose lookup lands in libcuda (dlsym_override.cpp): how cudart gets cuGetProcAddress;
//   - by cuGetProcAddress / cuGetProcAddress_v2 (driver_hooks.cpp): how cudart, static or shared, and
//     cudaGetDriverEntryPoint* get every other entry point.
// Wrappers: driver_hooks.cpp. Real functions, name lookup, libcuda's identity: driver_table.cpp.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "recorder/driver_catalog.h"

// Every wrapped function: the driver catalog's exported functions (recorder/driver_catalog.h), whose calls are
// recorded, between the entry points and the context destructions, which are not. X(name, ...): the catalog's
// entries carry more than the name.
#define GMT_DRIVER_HOOKS(X)                      \
  X(cuInit)                                      \
  X(cuGetProcAddress)                            \
  X(cuGetProcAddress_v2)                         \
  GMT_DRIVER_CATALOG(X, GMT_DRIVER_CATALOG_SKIP) \
  X(cuCtxDestroy_v2)                             \
  X(cuDevicePrimaryCtxRelease_v2)                \
  X(cuDevicePrimaryCtxReset_v2)                  \
  X(cuGreenCtxDestroy)

// Driver functions the wrappers call but do not wrap: the device, context and free memory of an event.
#define GMT_DRIVER_CALLS(X) \
  X(cuCtxGetDevice)         \
  X(cuCtxGetCurrent)        \
  X(cuMemGetInfo_v2)

namespace gmt::interpose {

// Wrapped functions first (0 .. kDriverHookCount-1), then the called-only ones.
enum class DriverFn : int {
#define GMT_DRIVER_ENUM(name, ...) name,
  GMT_DRIVER_HOOKS(GMT_DRIVER_ENUM) GMT_DRIVER_CALLS(GMT_DRIVER_ENUM)
#undef GMT_DRIVER_ENUM
      Count
};

#define GMT_DRIVER_COUNT(name, ...) +1
inline constexpr int kDriverHookCount = 0 GMT_DRIVER_HOOKS(GMT_DRIVER_COUNT);
#undef GMT_DRIVER_COUNT

// libc's dlsym, never our override (dlsym_override.cpp). nullptr only if glibc has none (never seen).
using DlsymFn = void* (*)(void*, const char*);
DlsymFn real_dlsym();

// The index of a wrapped function by its exported name, -1 when the name is not in the table.
// No allocation, no lock: called on every dlsym of the process.
int driver_hook_index(const char* symbol);

// Our wrapper for a table index (driver_hooks.cpp); its address inside this library, never an interposed one.
void* driver_wrapper(int index);
const char* driver_hook_name(int index);

// Each entry's libcuda function once known (driver_table.cpp; constant-initialized, valid before any constructor).
extern std::atomic<void*> g_driver_real[static_cast<size_t>(DriverFn::Count)];
// Set once libcuda.so.1 could not be loaded (driver_table.cpp): the disk is not searched again, and no entry will be
// found (the simulated runtime's processes, whose every event asks for cuCtxGetCurrent).
extern std::atomic<bool> g_no_driver;
void* find_driver_real(DriverFn fn);

// libcuda's function behind an entry, resolved by exported name on first use (loading libcuda, RTLD_LOCAL, in
// the rare case that a wrapper runs before anything loaded it). nullptr when there is no driver or the driver
// lacks the function. Never called from dlsym: it may dlopen. Inline: every wrapper and every event's
// cuCtxGetCurrent ask.
inline void* driver_real(DriverFn fn) {
  void* real = g_driver_real[static_cast<size_t>(fn)].load(std::memory_order_acquire);
  if (real) return real;
  return g_no_driver.load(std::memory_order_relaxed) ? nullptr : find_driver_real(fn);
}

// Records the real function a dlsym lookup found in libcuda, so the wrapper need not look it up again.
void note_driver_real(int index, void* real);

// For cuGetProcAddress: the index of the entry whose real function is exactly `real`, or -1 when none is
// (another function, or another version of one: e.g. the 32-bit cuMemAlloc that pre-3.2 callers get).
int driver_hook_for_real(void* real);

// Whether `address` lies in the loaded libcuda (by the base dladdr reports). No allocation.
bool is_in_libcuda(const void* address);

// GMT_DEBUG_DRIVER_HOOKS=1: one stderr line per handed-out or refused entry point, to check on a real driver
// which lookups reach the wrappers. printf-style; bounded stack buffer; no allocation.
bool driver_debug_enabled();
void driver_debug(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace gmt::interpose

#define GMT_DRIVER_REAL(name) \
  reinterpret_cast<decltype(&::name)>(::gmt::interpose::driver_real(::gmt::interpose::DriverFn::name))
