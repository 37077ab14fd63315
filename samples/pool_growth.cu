// A custom stream-ordered pool that keeps everything it reserved (release threshold UINT64_MAX) and grows fast: 30 MiB,
// a pause, then 120 MiB more in twelve quick allocations (a used peak of 150 MiB), all freed and synchronized at the
// end. The default pool (release threshold 0) holds 4 MiB for a moment. What the pools reserved must never be
// reported below what they handed out (issue 34, point 2). Leaks nothing.
// Usage: pool_growth
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "sample_common.h"

int main() {
  constexpr size_t kMiB = size_t{1} << 20;
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool;
  SAMPLE_CHECK(cudaMemPoolCreate(&pool, &props));
  uint64_t keep_everything = UINT64_MAX;
  SAMPLE_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything));
  cudaStream_t stream;
  SAMPLE_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  std::vector<void*> held(1);
  SAMPLE_CHECK(cudaMallocFromPoolAsync(&held[0], 30 * kMiB, pool, stream));  // POOL-FIRST
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  for (int i = 0; i < 12; ++i) {
    held.push_back(nullptr);
    SAMPLE_CHECK(cudaMallocFromPoolAsync(&held.back(), 10 * kMiB, pool, stream));  // POOL-GROWTH
  }
  void* scratch = nullptr;
  SAMPLE_CHECK(cudaMallocAsync(&scratch, 4 * kMiB, stream));  // DEFAULT-POOL
  SAMPLE_CHECK(cudaFreeAsync(scratch, stream));
  for (void* p : held) SAMPLE_CHECK(cudaFreeAsync(p, stream));
  SAMPLE_CHECK(cudaStreamSynchronize(stream));
  SAMPLE_CHECK(cudaStreamDestroy(stream));
  std::printf("used peak: %zu\n", 150 * kMiB);
  LeakTruth().print();
  return 0;
}
