// The module stack_shapes loads, unloads and loads again: each load makes one allocation of 7000 bytes.
#include <cuda_runtime.h>

extern "C" __attribute__((visibility("default"), noinline)) size_t plugin_alloc() {
  void* p = nullptr;
  if (cudaMalloc(&p, 7000) != cudaSuccess) return 0;  // PLUGIN-SITE
  return 7000;
}
