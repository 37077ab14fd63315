// Helpers shared by the samples: error checking, and the "truth" line each sample prints about what it
// leaked on purpose, so that tests compare gpumemtrace's report with what the program itself knows.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define SAMPLE_CHECK(call)                                                                                       \
  do {                                                                                                           \
    cudaError_t sample_err = (call);                                                                             \
    if (sample_err != cudaSuccess) {                                                                             \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(sample_err)); \
      std::exit(1);                                                                                              \
    }                                                                                                            \
  } while (0)

// The program's own account of what it leaked. Printed on stdout as one line:
//   truth: leaked_bytes=N leaked_allocations=M failed_allocations=K
struct LeakTruth {
  unsigned long long leaked_bytes = 0;
  unsigned long long leaked_allocations = 0;
  unsigned long long failed_allocations = 0;

  void leak(size_t bytes) {
    leaked_bytes += bytes;
    leaked_allocations += 1;
  }
  void print() const {
    std::printf("truth: leaked_bytes=%llu leaked_allocations=%llu failed_allocations=%llu\n", leaked_bytes,
                leaked_allocations, failed_allocations);
    std::fflush(stdout);
  }
};
