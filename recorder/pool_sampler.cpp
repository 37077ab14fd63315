#include "recorder/pool_sampler.h"

#include <cuda.h>
#include <dlfcn.h>

#include <atomic>

#include "recorder/cache_hints.h"
#include "recorder/capture_safety.h"
#include "recorder/recorder.h"

namespace gmt::recorder {
namespace {

constexpr uint64_t kMinSampleIntervalNs = 10'000'000;

using DeviceGetMemPoolFn = CUresult (*)(CUmemoryPool*, CUdevice);
using MemPoolGetAttributeFn = CUresult (*)(CUmemoryPool, CUmemPool_attribute, void*);

struct DriverFunctions {
  DeviceGetMemPoolFn device_get_mem_pool = nullptr;
  MemPoolGetAttributeFn pool_get_attribute = nullptr;
};

// Resolved once from the libcuda the app already loaded (never loads it: a process without a driver never
// gets here). Neither function is wrapped by any backend, so plain dlsym returns the driver's own.
const DriverFunctions& driver() {
  static const DriverFunctions functions = [] {
    DriverFunctions f;
    if (void* cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD)) {
      f.device_get_mem_pool = reinterpret_cast<DeviceGetMemPoolFn>(dlsym(cuda, "cuDeviceGetMemPool"));
      f.pool_get_attribute = reinterpret_cast<MemPoolGetAttributeFn>(dlsym(cuda, "cuMemPoolGetAttribute"));
      dlclose(cuda);
    }
    return f;
  }();
  return functions;
}

thread_local uint64_t t_last_sample_ns __attribute__((tls_model("initial-exec"))) = 0;

}  // namespace

GMT_HOT void sample_pool(uint64_t pool, int16_t device, bool force, uint64_t now) {
  if (now == 0) now = now_ns();
  if (!force && now - t_last_sample_ns < kMinSampleIntervalNs) return;
  const DriverFunctions& f = driver();
  if (!f.pool_get_attribute) return;
  RelaxedCaptureScope relaxed;  // not stream-ordered: allowed while a stream captures only in relaxed mode
  CUmemoryPool handle = reinterpret_cast<CUmemoryPool>(pool);
  if (!handle) {
    if (device < 0 || !f.device_get_mem_pool || f.device_get_mem_pool(&handle, device) != CUDA_SUCCESS) return;
  }
  cuuint64_t reserved = 0, used = 0;
  if (f.pool_get_attribute(handle, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) != CUDA_SUCCESS ||
      f.pool_get_attribute(handle, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) != CUDA_SUCCESS) {
    return;
  }
  t_last_sample_ns = now;
  EventRecord e;
  e.time_ns = now;
  e.thread_id = current_thread_id();
  e.kind = schema::EventKind::PoolUsage;
  e.device = device;
  e.pool_usage = PoolUsagePayload{reinterpret_cast<uint64_t>(handle), reserved, used};
  record(e, /*take_stack=*/false);
}

}  // namespace gmt::recorder
