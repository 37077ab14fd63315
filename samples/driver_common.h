// Error checking for the samples that use the CUDA driver API directly.
#pragma once

#include <cuda.h>

#include <cstdio>
#include <cstdlib>

#define DRIVER_CHECK(call)                                                      \
  do {                                                                          \
    CUresult driver_err = (call);                                               \
    if (driver_err != CUDA_SUCCESS) {                                           \
      const char* text = nullptr;                                               \
      cuGetErrorString(driver_err, &text);                                      \
      std::fprintf(stderr, "%s failed: %s\n", #call, text ? text : "?");        \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)
