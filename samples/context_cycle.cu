// Contexts created and destroyed in turn on one device, by the driver API (cuCtxCreate / cuCtxDestroy) and by
// the runtime (cudaDeviceReset destroys the primary context): the next context can get a destroyed one's address,
// so a profiler that remembers the device of a context must forget it when the context goes
// (interpose/driver_hooks.cpp). Prints each context it allocated in ("context NAME 0x... allocations N"), so that
// a test can match every event to its context. Leaks one allocation, in the last context.
#include <cuda_runtime.h>

#include "driver_common.h"
#include "sample_common.h"

namespace {

LeakTruth truth;
constexpr int kPairsPerContext = 4;

void print_current_context(const char* name, int allocations) {
  CUcontext context = nullptr;
  DRIVER_CHECK(cuCtxGetCurrent(&context));
  std::printf("context %s %p allocations %d\n", name, static_cast<void*>(context), allocations);
}

void pairs_in_current_context() {
  for (int i = 0; i < kPairsPerContext; ++i) {
    CUdeviceptr p = 0;
    DRIVER_CHECK(cuMemAlloc(&p, (i + 1) << 20));
    DRIVER_CHECK(cuMemFree(p));
  }
}

__attribute__((noinline)) void keep_last_buffer(void** buffer) {
  SAMPLE_CHECK(cudaMalloc(buffer, 2 << 20));  // LEAK-SITE: keep_last_buffer
  truth.leak(2 << 20);
}

}  // namespace

int main() {
  DRIVER_CHECK(cuInit(0));
  CUdevice device;
  DRIVER_CHECK(cuDeviceGet(&device, 0));
  for (int round = 0; round < 3; ++round) {
    CUcontext context = nullptr;
    DRIVER_CHECK(cuCtxCreate(&context, nullptr, 0, device));
    pairs_in_current_context();
    char name[16];
    std::snprintf(name, sizeof name, "created%d", round);
    print_current_context(name, kPairsPerContext);
    DRIVER_CHECK(cuCtxDestroy(context));
  }
  // The runtime's primary context, reset (destroyed) and made again by the next runtime call.
  void* buffer = nullptr;
  SAMPLE_CHECK(cudaMalloc(&buffer, 1 << 20));
  SAMPLE_CHECK(cudaFree(buffer));
  print_current_context("primary0", 1);
  SAMPLE_CHECK(cudaDeviceReset());
  keep_last_buffer(&buffer);
  print_current_context("primary1", 1);
  truth.print();
  return 0;
}
