// Cost of allocation+free pairs, as the app sees it: prints ns per pair for each case, one line each.
// Usage: alloc_pairs [pairs=20000]. Run raw and under gpumemtrace by bench/overhead.py, interleaved.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                        \
  do {                                                                                     \
    cudaError_t err = (call);                                                              \
    if (err != cudaSuccess) {                                                              \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(err));             \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

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

}  // namespace

int main(int argc, char** argv) {
  int pairs = argc > 1 ? std::atoi(argv[1]) : 20000;
  CHECK(cudaFree(nullptr));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  const size_t sizes[] = {256, 1 << 20};
  for (size_t size : sizes) {  // warm-up of both paths, so pools and caches exist before timing
    ns_per_pair(2000, [&](void** p) { CHECK(cudaMalloc(p, size)); }, [](void* p) { CHECK(cudaFree(p)); });
    ns_per_pair(2000, [&](void** p) { CHECK(cudaMallocAsync(p, size, stream)); },
                [&](void* p) { CHECK(cudaFreeAsync(p, stream)); });
  }
  for (size_t size : sizes) {
    double sync_ns = ns_per_pair(pairs / 4, [&](void** p) { CHECK(cudaMalloc(p, size)); },
                                 [](void* p) { CHECK(cudaFree(p)); });
    std::printf("cudaMalloc+cudaFree %zu B: %.0f ns\n", size, sync_ns);
    double async_ns = ns_per_pair(pairs, [&](void** p) { CHECK(cudaMallocAsync(p, size, stream)); },
                                  [&](void* p) { CHECK(cudaFreeAsync(p, stream)); });
    std::printf("cudaMallocAsync+cudaFreeAsync %zu B: %.0f ns\n", size, async_ns);
  }
  CHECK(cudaStreamSynchronize(stream));
  CHECK(cudaStreamDestroy(stream));
  return 0;
}
