// A program that uses only the CUDA driver API (no runtime calls for memory): what the runtime hooks cannot
// see and the driver-level backends must. Leaks at three sites, on purpose.
#include "driver_common.h"
#include "sample_common.h"

namespace {

LeakTruth truth;

__attribute__((noinline)) void driver_device_buffer(size_t bytes) {
  CUdeviceptr buffer = 0;
  DRIVER_CHECK(cuMemAlloc(&buffer, bytes));  // LEAK-SITE: driver_device_buffer
  truth.leak(bytes);
}

__attribute__((noinline)) void driver_host_buffer(size_t bytes) {
  void* host = nullptr;
  DRIVER_CHECK(cuMemAllocHost(&host, bytes));  // LEAK-SITE: driver_host_buffer
  truth.leak(bytes);
}

__attribute__((noinline)) void driver_managed_buffer(size_t bytes) {
  CUdeviceptr managed = 0;
  DRIVER_CHECK(cuMemAllocManaged(&managed, bytes, CU_MEM_ATTACH_GLOBAL));  // LEAK-SITE: driver_managed_buffer
  truth.leak(bytes);
}

// Freed correctly: never a leak.
__attribute__((noinline)) void driver_temporaries() {
  for (int i = 0; i < 8; ++i) {
    CUdeviceptr p = 0;
    DRIVER_CHECK(cuMemAlloc(&p, (i + 1) * 65536));
    DRIVER_CHECK(cuMemFree(p));
    void* h = nullptr;
    DRIVER_CHECK(cuMemHostAlloc(&h, 4096, 0));
    DRIVER_CHECK(cuMemFreeHost(h));
  }
}

}  // namespace

int main() {
  use_primary_context_of_device0();

  driver_device_buffer(3 << 20);
  driver_host_buffer(128 << 10);
  driver_managed_buffer(1 << 20);
  driver_temporaries();
  truth.print();
  return 0;
}
