// Two training-style loops whose steps are NVTX ranges, with known truth for memory by range and growth per
// repetition (docs/analysis.md):
//   - "leaky step" (STEPS times): a temporary of (2 + s % 3) MiB inside a nested "forward" range, freed in
//     the step, and a 1 MiB cache entry that is never evicted: a slow leak, 1 MiB per repetition. The cache
//     is freed at shutdown (outside every range), so nothing leaks at exit: only the growth per repetition
//     finds it;
//   - "steady step" (STEPS times): a double-buffered 3 MiB output (each step frees the previous step's) and
//     a 1 MiB workspace freed in the step: every repetition leaves 3 MiB that it allocated live at its end,
//     but the same 3 MiB level each time, a steady state that must get no finding.
// 8 MiB of weights are allocated before and freed after both loops, outside every range.
//
//   range_steps [STEPS]   (default 8; prints "truth: range_steps steps=N")
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "sample_common.h"

namespace {

constexpr size_t kMiB = size_t{1} << 20;

__attribute__((noinline)) void* allocate(size_t bytes) {
  void* memory = nullptr;
  SAMPLE_CHECK(cudaMalloc(&memory, bytes));
  return memory;
}

// Remembers one result per step and never evicts: the slow leak.
__attribute__((noinline)) void cache_step_result(std::vector<void*>& cache) {
  void* entry = nullptr;
  SAMPLE_CHECK(cudaMalloc(&entry, kMiB));  // LEAK-SITE: cache_step_result
  cache.push_back(entry);
}

__attribute__((noinline)) void leaky_step(int step, std::vector<void*>& cache) {
  nvtxRangePushA("leaky step");
  nvtxRangePushA("forward");
  void* input = allocate((2 + step % 3) * kMiB);
  nvtxRangePop();
  cache_step_result(cache);
  SAMPLE_CHECK(cudaFree(input));
  nvtxRangePop();
}

__attribute__((noinline)) void steady_step(void*& output) {
  nvtxRangePushA("steady step");
  void* next = allocate(3 * kMiB);
  if (output) SAMPLE_CHECK(cudaFree(output));  // the previous step's output, read by this step
  output = next;
  void* workspace = allocate(kMiB);
  SAMPLE_CHECK(cudaFree(workspace));
  nvtxRangePop();
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 8;
  LeakTruth truth;
  void* weights = allocate(8 * kMiB);
  std::vector<void*> cache;
  for (int s = 0; s < steps; ++s) leaky_step(s, cache);
  void* output = nullptr;
  for (int s = 0; s < steps; ++s) steady_step(output);
  SAMPLE_CHECK(cudaFree(output));
  for (void* entry : cache) SAMPLE_CHECK(cudaFree(entry));  // shutdown: nothing leaks at exit
  SAMPLE_CHECK(cudaFree(weights));
  std::printf("truth: range_steps steps=%d\n", steps);
  truth.print();
  return 0;
}
