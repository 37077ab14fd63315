// A library the app links whose static object allocates device memory in its constructor and frees it in its
// destructor. The loader runs this constructor before the constructors of a preloaded library (ours), so the
// first hook runs before the profiler's own setup; the destructor runs in _dl_fini, after ours.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace {

struct DeviceBufferHolder {
  void* buffer = nullptr;
  __attribute__((noinline)) DeviceBufferHolder() {
    if (cudaMalloc(&buffer, 1 << 20) != cudaSuccess) std::abort();
  }
  ~DeviceBufferHolder() { cudaFree(buffer); }
};

DeviceBufferHolder g_holder;

}  // namespace

extern "C" bool holder_has_buffer() { return g_holder.buffer != nullptr; }
