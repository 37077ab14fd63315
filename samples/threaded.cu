// Many threads allocating and freeing at once; each thread leaks exactly one allocation of a size that names
// it (thread t leaks (t + 1) KiB). Usage: threaded [threads=8] [pairs_per_thread=10000]
#include <cuda_runtime.h>

#include <cstdlib>
#include <thread>
#include <vector>

#include "sample_common.h"

__attribute__((noinline)) void worker(int index, int pairs) {
  for (int i = 0; i < pairs; ++i) {
    void* p = nullptr;
    SAMPLE_CHECK(cudaMalloc(&p, 256 + (i % 7) * 512));
    SAMPLE_CHECK(cudaFree(p));
  }
  void* kept = nullptr;
  SAMPLE_CHECK(cudaMalloc(&kept, (index + 1) * 1024));  // LEAK-SITE: worker
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 8;
  int pairs = argc > 2 ? std::atoi(argv[2]) : 10000;
  SAMPLE_CHECK(cudaFree(nullptr));  // create the context before the threads race to do it
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker, t, pairs);
  for (auto& th : pool) th.join();

  LeakTruth truth;
  for (int t = 0; t < threads; ++t) truth.leak((t + 1) * 1024);
  truth.print();
  std::printf("expected: allocations=%llu frees=%llu\n", static_cast<unsigned long long>(threads) * (pairs + 1),
              static_cast<unsigned long long>(threads) * pairs);
  return 0;
}
