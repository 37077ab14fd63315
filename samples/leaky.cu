// A program that leaks GPU memory at several distinct call sites, on purpose, with known sizes.
// The functions are noinline so that each leak site keeps its own frame in the call stack at -O2; the
// `LEAK-SITE` markers let tests find the exact source line that gpumemtrace must report.
#include <cuda_runtime.h>

#include "sample_common.h"

namespace {

LeakTruth truth;

__global__ void fill(float* data, size_t n, float value) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) data[i] = value;
}

__attribute__((noinline)) float* load_weights(size_t bytes) {
  void* weights = nullptr;
  SAMPLE_CHECK(cudaMalloc(&weights, bytes));  // LEAK-SITE: load_weights
  fill<<<static_cast<unsigned>((bytes / sizeof(float) + 255) / 256), 256>>>(static_cast<float*>(weights),
                                                                            bytes / sizeof(float), 1.0f);
  SAMPLE_CHECK(cudaGetLastError());
  truth.leak(bytes);  // never freed
  return static_cast<float*>(weights);
}

__attribute__((noinline)) void make_workspace(size_t bytes) {
  void* workspace = nullptr;
  SAMPLE_CHECK(cudaMallocManaged(&workspace, bytes));  // LEAK-SITE: make_workspace
  truth.leak(bytes);                                   // the pointer goes out of scope: leaked every call
}

__attribute__((noinline)) void stage_host_buffer(size_t bytes) {
  void* staging = nullptr;
  SAMPLE_CHECK(cudaMallocHost(&staging, bytes));  // LEAK-SITE: stage_host_buffer
  truth.leak(bytes);
}

__attribute__((noinline)) void async_scratch(cudaStream_t stream, size_t bytes) {
  void* scratch = nullptr;
  SAMPLE_CHECK(cudaMallocAsync(&scratch, bytes, stream));  // LEAK-SITE: async_scratch
  truth.leak(bytes);
}

// Allocations that are freed correctly: they must never be reported as leaks.
__attribute__((noinline)) void temporary_buffers(cudaStream_t stream) {
  for (int i = 0; i < 10; ++i) {
    void* tmp = nullptr;
    SAMPLE_CHECK(cudaMalloc(&tmp, (i + 1) * 100000));
    SAMPLE_CHECK(cudaFree(tmp));
    void* async_tmp = nullptr;
    SAMPLE_CHECK(cudaMallocAsync(&async_tmp, 65536, stream));
    SAMPLE_CHECK(cudaFreeAsync(async_tmp, stream));
  }
}

// A request no device can satisfy: it must show up as a failed allocation, not as a leak.
__attribute__((noinline)) void request_too_much() {
  void* huge = nullptr;
  cudaError_t err = cudaMalloc(&huge, size_t(1) << 50);  // FAILED-SITE: request_too_much (1 PiB)
  if (err == cudaErrorMemoryAllocation) {
    truth.failed_allocations += 1;
    cudaGetLastError();  // clear it, as real code handling an OOM would
  } else {
    std::fprintf(stderr, "expected cudaErrorMemoryAllocation for 1 PiB, got %s\n", cudaGetErrorString(err));
    std::exit(1);
  }
}

}  // namespace

int main() {
  cudaStream_t stream;
  SAMPLE_CHECK(cudaStreamCreate(&stream));

  load_weights(4 << 20);                                  // 1 leak of 4 MiB
  for (int i = 0; i < 3; ++i) make_workspace(256 << 10);  // 3 leaks of 256 KiB, one call stack
  stage_host_buffer(64 << 10);                            // 1 leak of 64 KiB pinned host memory
  async_scratch(stream, 512 << 10);                       // 1 leak of 512 KiB, stream-ordered
  temporary_buffers(stream);
  request_too_much();

  SAMPLE_CHECK(cudaStreamSynchronize(stream));
  SAMPLE_CHECK(cudaStreamDestroy(stream));
  SAMPLE_CHECK(cudaDeviceSynchronize());
  truth.print();
  return 0;
}
