// The table of hooked CUDA runtime functions (docs/design.md, "Inside the process": hooks are thin, listed in
// one table). Each entry is
//   X(name, optional)
// `optional` entries may be absent from older runtimes; a missing required one is reported once.
// The hook bodies live in cudart_hooks.cpp; resolution of the real functions in real_functions.cpp.
#pragma once

#include <atomic>
#include <cstddef>

#define GMT_CUDART_HOOKS(X)              \
  X(cudaMalloc, false)                   \
  X(cudaMallocManaged, false)            \
  X(cudaMallocHost, false)               \
  X(cudaHostAlloc, false)                \
  X(cudaMallocPitch, false)              \
  X(cudaMalloc3D, false)                 \
  X(cudaMallocAsync, true)               \
  X(cudaMallocAsync_ptsz, true)          \
  X(cudaMallocFromPoolAsync, true)       \
  X(cudaMallocFromPoolAsync_ptsz, true)  \
  X(cudaFree, false)                     \
  X(cudaFreeHost, false)                 \
  X(cudaFreeAsync, true)                 \
  X(cudaFreeAsync_ptsz, true)            \
  X(cudaStreamCreate, false)             \
  X(cudaStreamCreateWithFlags, false)    \
  X(cudaStreamCreateWithPriority, false) \
  X(cudaStreamDestroy, false)            \
  X(cudaStreamSynchronize, false)        \
  X(cudaStreamSynchronize_ptsz, true)    \
  X(cudaDeviceSynchronize, false)        \
  X(cudaIpcOpenMemHandle, true)          \
  X(cudaIpcCloseMemHandle, true)         \
  /* not hooked, only called: */         \
  X(cudaGetDevice, false)                \
  X(cudaMemGetInfo, false)

namespace gmt::interpose {

enum class HookId : int {
#define GMT_HOOK_ENUM(name, optional) name,
  GMT_CUDART_HOOKS(GMT_HOOK_ENUM)
#undef GMT_HOOK_ENUM
      Count
};

// Each hook's real function once found (real_functions.cpp); nullptr until then.
extern std::atomic<void*> g_real_functions[static_cast<size_t>(HookId::Count)];
void* find_real_function(HookId id);

// The real function behind a hook: the next definition after ours in the lookup order (the app's libcudart,
// or the simulated one). nullptr when no CUDA runtime is loaded. Inline: every hook asks, once or twice per event
// (callgrind, 2026-12-07: 21 instructions a call out of line).
inline void* real_function(HookId id) {
  void* p = g_real_functions[static_cast<size_t>(id)].load(std::memory_order_acquire);
  return p ? p : find_real_function(id);
}

}  // namespace gmt::interpose

#define GMT_REAL(name) \
  reinterpret_cast<decltype(&name)>(::gmt::interpose::real_function(::gmt::interpose::HookId::name))
