// Stream-ordered allocation from two threads on two streams, with a custom memory pool and the default one.
// Each thread leaks one allocation from the custom pool; main leaks one from the default pool.
// Usage: async_pools [pairs_per_thread=2000]
#include <cuda_runtime.h>

#include <cstdlib>
#include <thread>
#include <vector>

#include "sample_common.h"

namespace {

__attribute__((noinline)) void* pool_leak(cudaMemPool_t pool, cudaStream_t stream, size_t bytes) {
  void* kept = nullptr;
  SAMPLE_CHECK(cudaMallocFromPoolAsync(&kept, bytes, pool, stream));  // LEAK-SITE: pool_leak
  return kept;
}

void worker(cudaMemPool_t pool, int index, int pairs) {
  SAMPLE_CHECK(cudaSetDevice(0));
  cudaStream_t stream;
  SAMPLE_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int i = 0; i < pairs; ++i) {
    void* p = nullptr;
    SAMPLE_CHECK(cudaMallocFromPoolAsync(&p, 4096 * (1 + i % 16), pool, stream));
    SAMPLE_CHECK(cudaFreeAsync(p, stream));
  }
  pool_leak(pool, stream, (index + 1) << 20);
  SAMPLE_CHECK(cudaStreamSynchronize(stream));
  SAMPLE_CHECK(cudaStreamDestroy(stream));
}

__attribute__((noinline)) void default_pool_leak(size_t bytes) {
  void* kept = nullptr;
  SAMPLE_CHECK(cudaMallocAsync(&kept, bytes, 0));  // LEAK-SITE: default_pool_leak
  SAMPLE_CHECK(cudaStreamSynchronize(0));
}

}  // namespace

int main(int argc, char** argv) {
  int pairs = argc > 1 ? std::atoi(argv[1]) : 2000;
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool;
  SAMPLE_CHECK(cudaMemPoolCreate(&pool, &props));

  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) threads.emplace_back(worker, pool, t, pairs);
  for (auto& th : threads) th.join();
  default_pool_leak(3 << 20);

  LeakTruth truth;
  truth.leak(1 << 20);
  truth.leak(2 << 20);
  truth.leak(3 << 20);
  truth.print();
  std::printf("expected: allocations=%d\n", 2 * (pairs + 1) + 1);
  return 0;
}
