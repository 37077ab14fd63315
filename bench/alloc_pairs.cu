// Cost of allocation+free pairs, as the app sees it: prints ns per pair for each case, one line each.
// Usage: alloc_pairs [pairs=20000] (64 MiB blocks: pairs/40; 8 threads: pairs/4 each). Run raw and under gpumemtrace by
// bench/overhead.py, interleaved.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "cuda_check.h"

namespace {

constexpr int kLive = 64;  // allocations live at a time, as in shared/FACTS.md's raw figures

template <typename Alloc, typename Free>
double ns_per_pair(int pairs, Alloc alloc, Free release) {
  std::vector<void*> live(kLive, nullptr);
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < pairs; ++i) {
    void*& slot = live[i % kLive];
    if (slot) release(slot);
    alloc(&slot);
  }
  for (void*& p : live) {
    if (p) release(p);
    p = nullptr;
  }
  auto elapsed = std::chrono::steady_clock::now() - start;
  return std::chrono::duration<double, std::nano>(elapsed).count() / pairs;
}

// Eight threads at once, each on its own stream: ns per pair as each thread sees it (wall time / its pairs).
double threaded_async_ns_per_pair(int threads, int pairs, size_t size) {
  std::vector<cudaStream_t> streams(threads);
  for (auto& s : streams) CHECK(cudaStreamCreate(&s));
  std::vector<std::thread> pool;
  auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ns_per_pair(
          pairs, [&](void** p) { CHECK(cudaMallocAsync(p, size, streams[t])); },
          [&](void* p) { CHECK(cudaFreeAsync(p, streams[t])); });
    });
  }
  for (auto& thread : pool) thread.join();
  auto elapsed = std::chrono::steady_clock::now() - start;
  for (auto& s : streams) {
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaStreamDestroy(s));
  }
  return std::chrono::duration<double, std::nano>(elapsed).count() / pairs;
}

}  // namespace

int main(int argc, char** argv) {
  int pairs = argc > 1 ? std::atoi(argv[1]) : 20000;
  CHECK(cudaFree(nullptr));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  const size_t sizes[] = {256, 1 << 20};
  for (size_t size : sizes) {  // warm-up of both paths, so pools and caches exist before timing
    ns_per_pair(
        2000, [&](void** p) { CHECK(cudaMalloc(p, size)); }, [](void* p) { CHECK(cudaFree(p)); });
    ns_per_pair(
        2000, [&](void** p) { CHECK(cudaMallocAsync(p, size, stream)); },
        [&](void* p) { CHECK(cudaFreeAsync(p, stream)); });
  }
  for (size_t size : sizes) {
    double sync_ns = ns_per_pair(
        pairs / 4, [&](void** p) { CHECK(cudaMalloc(p, size)); }, [](void* p) { CHECK(cudaFree(p)); });
    std::printf("cudaMalloc+cudaFree %zu B: %.0f ns\n", size, sync_ns);
    double async_ns = ns_per_pair(
        pairs, [&](void** p) { CHECK(cudaMallocAsync(p, size, stream)); },
        [&](void* p) { CHECK(cudaFreeAsync(p, stream)); });
    std::printf("cudaMallocAsync+cudaFreeAsync %zu B: %.0f ns\n", size, async_ns);
  }
  // Large blocks: cudaMalloc maps fresh memory each time (64 live: 4 GiB).
  constexpr size_t kLarge = size_t{64} << 20;
  double large_ns = ns_per_pair(
      pairs / 40, [&](void** p) { CHECK(cudaMalloc(p, kLarge)); }, [](void* p) { CHECK(cudaFree(p)); });
  std::printf("cudaMalloc+cudaFree 64 MiB: %.0f ns\n", large_ns);
  threaded_async_ns_per_pair(8, 2000, 256);  // warm-up: the threads' streams and pools
  std::printf("8 threads cudaMallocAsync+cudaFreeAsync 256 B: %.0f ns\n",
              threaded_async_ns_per_pair(8, pairs / 4, 256));
  CHECK(cudaStreamSynchronize(stream));
  CHECK(cudaStreamDestroy(stream));
  return 0;
}
