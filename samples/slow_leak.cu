// A loop that leaks a little in every iteration among balanced churn: a cache that only grows. Live memory
// after each iteration is kLeakBytes higher than after the one before. The cache is freed at shutdown, so
// nothing is live at exit: no leak report can find this, only growth detection. The `LEAK-SITE` marker lets
// tests find the source line that gpumemtrace must name among the growing call stacks.
//
//   slow_leak [ITERATIONS] [--probe-capacity]
//
// --probe-capacity ends the run with a request larger than any device, so that the trace records the
// device's total memory with the failure (as the first out-of-memory error of a real run would) and the
// report can project when the device is full. Prints, besides the usual truth line:
//   truth: growth_bytes_per_iteration=N iterations=M
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "sample_common.h"

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kLeakBytes = 1 * kMiB;

LeakTruth truth;

__attribute__((noinline)) void* load_model(size_t bytes) {
  void* model = nullptr;
  SAMPLE_CHECK(cudaMalloc(&model, bytes));
  return model;
}

// Remembers one result per step and never evicts: the slow leak.
__attribute__((noinline)) void cache_result(std::vector<void*>& cache) {
  void* entry = nullptr;
  SAMPLE_CHECK(cudaMalloc(&entry, kLeakBytes));  // LEAK-SITE: cache_result
  cache.push_back(entry);
}

// Balanced churn: temporaries of changing sizes, all freed within the step.
__attribute__((noinline)) void process_batch(int step, std::vector<void*>& cache) {
  void* input = nullptr;
  void* scratch = nullptr;
  SAMPLE_CHECK(cudaMalloc(&input, (2 + step % 3) * kMiB));
  SAMPLE_CHECK(cudaMalloc(&scratch, (4 + step % 5) * kMiB));
  cache_result(cache);
  usleep(1000);  // the "kernels": long enough that a busy machine's hiccups stay shorter than a window
  SAMPLE_CHECK(cudaFree(scratch));
  SAMPLE_CHECK(cudaFree(input));
}

__attribute__((noinline)) void probe_capacity() {
  void* huge = nullptr;
  if (cudaMalloc(&huge, size_t(1) << 50) == cudaErrorMemoryAllocation) {
    truth.failed_allocations += 1;
    cudaGetLastError();
  } else {
    std::fprintf(stderr, "expected cudaErrorMemoryAllocation for 1 PiB\n");
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 200;
  bool probe = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--probe-capacity") == 0) {
      probe = true;
    } else {
      iterations = std::atoi(argv[i]);
    }
  }
  void* model = load_model(64 * kMiB);
  std::vector<void*> cache;
  for (int step = 0; step < iterations; ++step) process_batch(step, cache);
  if (probe) probe_capacity();
  for (void* entry : cache) SAMPLE_CHECK(cudaFree(entry));  // shutdown: nothing leaks at exit
  SAMPLE_CHECK(cudaFree(model));
  std::printf("truth: growth_bytes_per_iteration=%zu iterations=%d\n", kLeakBytes, iterations);
  truth.print();
  return 0;
}
