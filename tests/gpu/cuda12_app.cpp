// A CUDA runtime program without kernels, so that g++ alone builds it against any cudart: tests/gpu/test_gpu_cuda12.py
// builds it against PyPI's CUDA 12 runtime (nvidia-cuda-runtime-cu12), with the shared and the static cudart, and as a
// library (GMT_CUDA12_APP_LIBRARY) that tests/gpu/cuda12_loader.cpp opens with RTLD_LOCAL, as Python opens an
// extension module. Known leaks, printed as the samples' truth line; the LEAK-SITE markers name the lines the report
// must show.
//
// The runtime's functions are declared here rather than by cuda_runtime_api.h: the CUDA 12 runtime wheel ships that
// header without the crt/ headers it includes (nvidia-cuda-runtime-cu12 12.9.79), and the ABI of these calls is the
// same in every CUDA 12 and 13 runtime.
#include <cstddef>
#include <cstdio>
#include <cstdlib>

extern "C" {
using cudaError_t = int;
constexpr cudaError_t cudaSuccess = 0;
using cudaStream_t = struct CUstream_st*;
constexpr unsigned int cudaMemAttachGlobal = 1;
const char* cudaGetErrorString(cudaError_t error);
cudaError_t cudaRuntimeGetVersion(int* version);
cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaMalloc(void** pointer, size_t bytes);
cudaError_t cudaFree(void* pointer);
cudaError_t cudaMallocAsync(void** pointer, size_t bytes, cudaStream_t stream);
cudaError_t cudaFreeAsync(void* pointer, cudaStream_t stream);
cudaError_t cudaMallocHost(void** pointer, size_t bytes);
cudaError_t cudaFreeHost(void* pointer);
cudaError_t cudaMallocManaged(void** pointer, size_t bytes, unsigned int flags);
}

#define CHECK(call)                                                              \
  do {                                                                           \
    cudaError_t error = (call);                                                  \
    if (error != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(error)); \
      std::exit(2);                                                              \
    }                                                                            \
  } while (0)

namespace {

// Not inlined: each leak site is its own innermost frame, as the test looks them up.
__attribute__((noinline)) void* keep_weights(size_t bytes) {
  void* pointer = nullptr;
  CHECK(cudaMalloc(&pointer, bytes));  // LEAK-SITE: keep_weights
  return pointer;
}

__attribute__((noinline)) void* keep_async_scratch(size_t bytes, cudaStream_t stream) {
  void* pointer = nullptr;
  CHECK(cudaMallocAsync(&pointer, bytes, stream));  // LEAK-SITE: keep_async_scratch
  return pointer;
}

__attribute__((noinline)) void* keep_managed(size_t bytes) {
  void* pointer = nullptr;
  CHECK(cudaMallocManaged(&pointer, bytes, cudaMemAttachGlobal));  // LEAK-SITE: keep_managed
  return pointer;
}

}  // namespace

int app_main() {
  int runtime = 0;
  CHECK(cudaRuntimeGetVersion(&runtime));
  std::printf("cudart %d\n", runtime);
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  for (int i = 0; i < 10; ++i) {  // freed: never a leak
    void* pointer = nullptr;
    CHECK(cudaMalloc(&pointer, 1 << 20));
    CHECK(cudaFree(pointer));
    CHECK(cudaMallocAsync(&pointer, 1 << 16, stream));
    CHECK(cudaFreeAsync(pointer, stream));
  }
  void* host = nullptr;
  CHECK(cudaMallocHost(&host, 1 << 16));
  CHECK(cudaFreeHost(host));
  for (int i = 0; i < 2; ++i) keep_weights(4 << 20);  // one call site: one leak group of 2 allocations
  keep_async_scratch(3 << 20, stream);
  keep_managed(1 << 20);
  CHECK(cudaStreamSynchronize(stream));
  std::printf("truth: leaked_bytes=%d leaked_allocations=4 failed_allocations=0\n", (8 << 20) + (3 << 20) + (1 << 20));
  return 0;
}

#ifdef GMT_CUDA12_APP_LIBRARY
extern "C" int gmt_cuda12_app_main() { return app_main(); }
#else
int main() { return app_main(); }
#endif
