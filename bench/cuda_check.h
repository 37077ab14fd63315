// CHECK(call): a benchmark stops at the first failing CUDA runtime call, naming it: a figure measured past a
// failure would be a figure of the error path.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                            \
  do {                                                                         \
    cudaError_t err = (call);                                                  \
    if (err != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(err)); \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)
