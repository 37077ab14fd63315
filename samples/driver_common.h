// Error checking for the samples that use the CUDA driver API directly.
#pragma once

#include <cuda.h>

#include <cstdio>
#include <cstdlib>

#define DRIVER_CHECK(call)                                               \
  do {                                                                   \
    CUresult driver_err = (call);                                        \
    if (driver_err != CUDA_SUCCESS) {                                    \
      const char* text = nullptr;                                        \
      cuGetErrorString(driver_err, &text);                               \
      std::fprintf(stderr, "%s failed: %s\n", #call, text ? text : "?"); \
      std::exit(1);                                                      \
    }                                                                    \
  } while (0)

// Initializes the driver and makes device 0's primary context current, as the runtime would on first use.
inline void use_primary_context_of_device0() {
  DRIVER_CHECK(cuInit(0));
  CUdevice device;
  DRIVER_CHECK(cuDeviceGet(&device, 0));
  CUcontext context;
  DRIVER_CHECK(cuDevicePrimaryCtxRetain(&context, device));
  DRIVER_CHECK(cuCtxSetCurrent(context));
}
