// One "rank" of a multi-process job, for the merged-report tests: it runs on the GPU its launcher gave it
// (LOCAL_RANK, as torchrun sets it) and one chosen rank leaks on purpose.
//   rank_worker LEAK_RANK [STEPS]
// Every rank: 32 MiB of weights for the whole run, and 8 MiB of activations allocated and freed each step.
// The rank whose RANK equals LEAK_RANK also keeps 16 MiB every step (never freed). So, with S steps:
//   other ranks: peak 40 MiB, nothing leaked; the leaking rank: peak 40 MiB + S * 16 MiB, S * 16 MiB leaked.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "sample_common.h"

namespace {

constexpr size_t kMiB = size_t{1} << 20;
LeakTruth truth;

int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::atoi(value) : fallback;
}

__attribute__((noinline)) void* keep_history(size_t bytes) {
  void* kept = nullptr;
  SAMPLE_CHECK(cudaMalloc(&kept, bytes));  // LEAK-SITE: keep_history
  truth.leak(bytes);
  return kept;
}

__attribute__((noinline)) void* allocate(size_t bytes) {
  void* p = nullptr;
  SAMPLE_CHECK(cudaMalloc(&p, bytes));
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: rank_worker LEAK_RANK [STEPS]\n");
    return 2;
  }
  const int leak_rank = std::atoi(argv[1]);
  const int steps = argc > 2 ? std::atoi(argv[2]) : 10;
  const int rank = env_int("RANK", 0);
  const int device = env_int("LOCAL_RANK", 0);
  SAMPLE_CHECK(cudaSetDevice(device));

  void* weights = allocate(32 * kMiB);
  for (int step = 0; step < steps; ++step) {
    void* activations = allocate(8 * kMiB);
    if (rank == leak_rank) keep_history(16 * kMiB);
    SAMPLE_CHECK(cudaFree(activations));
  }
  SAMPLE_CHECK(cudaFree(weights));
  int current = -1;
  SAMPLE_CHECK(cudaGetDevice(&current));
  std::printf("rank %d on device %d\n", rank, current);
  truth.print();
  return 0;
}
