// The table of hooked CUDA runtime functions (docs/design.md, "Inside the process": hooks are thin, listed in
// one table). Each entry is
//   X(name, optional)
// `optional` entries may be absent from older runtimes; a missing required one is reported once.
// The hook bodies live in cudart_hooks.cpp; resolution of the real functions in real_functions.cpp.
#pragma once

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

// The real function behind a hook: the next definition after ours in the lookup order (the app's libcudart,
// or the simulated one). nullptr when no CUDA runtime is loaded.
void* real_function(HookId id);

}  // namespace gmt::interpose

#define GMT_REAL(name) \
  reinterpret_cast<decltype(&name)>(::gmt::interpose::real_function(::gmt::interpose::HookId::name))
