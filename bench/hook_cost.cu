// What one hooked allocation+free pair costs the calling thread, in CPU time (not wall time: on a loaded
// machine a thread waits for a core, and that wait is not the profiler's cost). One thread makes PAIRS pairs
// from a call site DEPTH frames below main (real apps allocate deep in their stacks, and the stack walk grows
// with depth), after warm-up, and prints one "case: N ns" line per case: thread CPU ns per pair, the minimum
// over a few repetitions (the least disturbed). Run raw and under `gpumemtrace run` by
// bench/hook_cost.py, which prints the ratios side by side.
// Usage: hook_cost [pairs=200000] [depth=12]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "cuda_check.h"

namespace {

constexpr int kLive = 64;
constexpr int kRepetitions = 5;

double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

enum class Kind { Sync, Async };

struct Loop {
  Kind kind;
  size_t size;
  cudaStream_t stream;
  int pairs;
};

// The allocation loop itself, at the bottom of the recursion. noinline everywhere: each level is a real frame.
__attribute__((noinline)) void run_pairs(const Loop& loop) {
  void* live[kLive] = {};
  for (int i = 0; i < loop.pairs; ++i) {
    void*& slot = live[i % kLive];
    if (loop.kind == Kind::Sync) {
      if (slot) CHECK(cudaFree(slot));
      CHECK(cudaMalloc(&slot, loop.size));
    } else {
      if (slot) CHECK(cudaFreeAsync(slot, loop.stream));
      CHECK(cudaMallocAsync(&slot, loop.size, loop.stream));
    }
  }
  for (void* p : live) {
    if (!p) continue;
    if (loop.kind == Kind::Sync) {
      CHECK(cudaFree(p));
    } else {
      CHECK(cudaFreeAsync(p, loop.stream));
    }
  }
}

__attribute__((noinline)) void descend(const Loop& loop, int depth) {
  if (depth <= 0) {
    run_pairs(loop);
  } else {
    descend(loop, depth - 1);
  }
  asm volatile("" ::: "memory");  // not a tail call: every level stays on the stack
}

double cpu_ns_per_pair(const Loop& loop, int depth) {
  double best = 0;
  for (int r = 0; r < kRepetitions; ++r) {
    double start = thread_cpu_ns();
    descend(loop, depth);
    double ns = (thread_cpu_ns() - start) / loop.pairs;
    best = r == 0 ? ns : std::min(best, ns);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int pairs = argc > 1 ? std::atoi(argv[1]) : 200000;
  int depth = argc > 2 ? std::atoi(argv[2]) : 12;
  if (pairs <= 0 || depth < 0) {
    std::fprintf(stderr, "usage: hook_cost [pairs>0] [depth>=0]\n");
    return 2;
  }
  CHECK(cudaFree(nullptr));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  const Loop sync{Kind::Sync, 256, nullptr, pairs};
  const Loop async{Kind::Async, 256, stream, pairs};
  cpu_ns_per_pair(Loop{Kind::Sync, 256, nullptr, std::min(pairs, 2000)}, depth);  // warm-up: caches, pools
  cpu_ns_per_pair(Loop{Kind::Async, 256, stream, std::min(pairs, 2000)}, depth);
  std::printf("cudaMalloc+cudaFree 256 B: %.1f ns\n", cpu_ns_per_pair(sync, depth));
  std::printf("cudaMallocAsync+cudaFreeAsync 256 B: %.1f ns\n", cpu_ns_per_pair(async, depth));
  CHECK(cudaStreamSynchronize(stream));
  CHECK(cudaStreamDestroy(stream));
  return 0;
}
