#include "recorder/pool_sampler.h"

#include <cuda.h>
#include <dlfcn.h>

#include <atomic>

#include "recorder/cache_hints.h"
#include "recorder/capture_safety.h"
#include "recorder/pool_peaks.h"
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

// The runtime's own pool functions, for a process with no driver loaded (the simulated runtime): found in the
// libcudart the process loaded, never loading one. cudaMemPoolAttr's values equal CUmemPool_attribute's.
using RuntimeDeviceGetMemPoolFn = int (*)(CUmemoryPool*, int);
using RuntimeMemPoolGetAttributeFn = int (*)(CUmemoryPool, int, void*);
struct RuntimeFunctions {
  RuntimeDeviceGetMemPoolFn device_get_mem_pool = nullptr;
  RuntimeMemPoolGetAttributeFn pool_get_attribute = nullptr;
};

const RuntimeFunctions& runtime() {
  static const RuntimeFunctions functions = [] {
    RuntimeFunctions f;
    for (const char* name : {"libcudart.so.13", "libcudart.so.12"}) {
      void* cudart = dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
      if (!cudart) continue;
      f.device_get_mem_pool = reinterpret_cast<RuntimeDeviceGetMemPoolFn>(dlsym(cudart, "cudaDeviceGetMemPool"));
      f.pool_get_attribute = reinterpret_cast<RuntimeMemPoolGetAttributeFn>(dlsym(cudart, "cudaMemPoolGetAttribute"));
      dlclose(cudart);
      if (f.device_get_mem_pool && f.pool_get_attribute) break;
    }
    return f;
  }();
  return functions;
}

}  // namespace

bool read_pool_usage(uint64_t pool, int16_t device, PoolUsagePayload& out) {
  cuuint64_t reserved = 0, used = 0;
  // The driver first; where it cannot say (none loaded, or a stub without a GPU beside the simulated runtime),
  // the runtime's own functions.
  CUmemoryPool handle = reinterpret_cast<CUmemoryPool>(pool);
  const DriverFunctions& d = driver();
  bool read =
      d.pool_get_attribute != nullptr &&
      (handle || (device >= 0 && d.device_get_mem_pool && d.device_get_mem_pool(&handle, device) == CUDA_SUCCESS)) &&
      d.pool_get_attribute(handle, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) == CUDA_SUCCESS &&
      d.pool_get_attribute(handle, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) == CUDA_SUCCESS;
  if (!read) {
    handle = reinterpret_cast<CUmemoryPool>(pool);
    const RuntimeFunctions& r = runtime();
    read = r.pool_get_attribute != nullptr &&
           (handle || (device >= 0 && r.device_get_mem_pool && r.device_get_mem_pool(&handle, device) == 0)) &&
           r.pool_get_attribute(handle, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) == 0 &&
           r.pool_get_attribute(handle, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) == 0;
  }
  if (!read) return false;
  out = PoolUsagePayload{reinterpret_cast<uint64_t>(handle), reserved, used};
  return true;
}

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
