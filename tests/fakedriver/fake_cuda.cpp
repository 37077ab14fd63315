// A TEST FIXTURE, not a driver: libcuda.so.1 for a machine without a GPU, enough of the driver API for the
// memory functions gpumemtrace's driver-level backends see (the driver entry-point hooks and the CUPTI driver
// callbacks), so that both run end to end on the build machine (test_driver_backends.py). Memory is bookkeeping
// only: addresses are deterministic numbers in per-device ranges and never backed by pages; nothing here may be
// dereferenced by the app. Two devices, each with a fake context and a default pool. The CUPTI callbacks of each
// function are raised at its entry and exit, as the real driver does, when the fake CUPTI is attached
// (fake_driver.h).
#undef CUDA_API_PER_THREAD_DEFAULT_STREAM
#include <cuda.h>
#include <cupti.h>  // the driver's callback ids and each function's parameter struct (generated_cuda_meta.h)

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>

#include "fake_driver.h"

#undef cuGetProcAddress
#undef cuIpcOpenMemHandle

extern "C" {
CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags);
CUresult cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int Flags);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
}

namespace {

constexpr int kDevices = 2;
constexpr uint64_t kDeviceBytes = uint64_t{16} << 30;
constexpr uint64_t kPoolReservedBytes = uint64_t{32} << 20;

CUcontext context_of(int device) { return reinterpret_cast<CUcontext>(uintptr_t{0x1000} * (device + 1)); }
thread_local CUcontext t_current = context_of(0);

int device_of(CUcontext context) {
  for (int d = 0; d < kDevices; ++d) {
    if (context == context_of(d)) return d;
  }
  return -1;
}

struct Block {
  uint64_t size;
  int device;
  uint64_t pool;  // 0: not from a pool
};

std::mutex g_mutex;
std::map<uint64_t, Block> g_blocks;  // device, managed, pinned, IPC-opened and reserved ranges by address
std::map<uint64_t, int> g_handles;   // VMM physical handles (created or imported) -> device
std::map<uint64_t, int> g_pools;     // pool handle -> device
std::map<uint64_t, uint64_t> g_pool_used;
uint64_t g_next[kDevices] = {0x200000000ull, 0x300000000ull};
uint64_t g_next_host = 0x100000000ull;
uint64_t g_next_virtual = 0x700000000ull;
uint64_t g_next_ipc = 0x600000000ull;
uint64_t g_next_handle = 0x1000;
uint64_t g_next_pool = 0x5000;
uint64_t g_used[kDevices] = {};

uint64_t default_pool(int device) { return 0x4000 + static_cast<uint64_t>(device); }

uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

GmtFakeCuptiRaise g_raise = nullptr;

// Raises the callback at entry, runs the call, raises it at exit with the result: what the real driver does for
// every API function while a CUPTI subscriber has the id enabled.
template <typename Params, typename Body>
CUresult traced(CUpti_CallbackId cbid, const char* name, const Params& params, Body body) {
  GmtFakeCuptiRaise raise = g_raise;
  if (raise) raise(CUPTI_CB_DOMAIN_DRIVER_API, cbid, CUPTI_API_ENTER, name, &params, nullptr, t_current);
  CUresult result = body();
  if (raise) raise(CUPTI_CB_DOMAIN_DRIVER_API, cbid, CUPTI_API_EXIT, name, &params, &result, t_current);
  return result;
}
#define GMT_TRACED(fn, ...) traced(CUPTI_DRIVER_TRACE_CBID_##fn, #fn, fn##_params{__VA_ARGS__}, [&]() -> CUresult
#define GMT_TRACED_AS(cbid_name, params_type, ...) \
  traced(CUPTI_DRIVER_TRACE_CBID_##cbid_name, #cbid_name, params_type{__VA_ARGS__}, [&]() -> CUresult

int current_device() { return device_of(t_current); }

CUresult allocate(int device, uint64_t size, uint64_t pool, CUdeviceptr* out) {
  if (!out || size == 0) return CUDA_ERROR_INVALID_VALUE;
  if (device < 0) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard lock(g_mutex);
  uint64_t rounded = round_up(size, 512);
  if (g_used[device] + rounded > kDeviceBytes) return CUDA_ERROR_OUT_OF_MEMORY;
  uint64_t address = g_next[device];
  g_next[device] += rounded;
  g_used[device] += rounded;
  g_blocks[address] = Block{rounded, device, pool};
  if (pool) g_pool_used[pool] += rounded;
  *out = address;
  return CUDA_SUCCESS;
}

CUresult release(uint64_t address) {
  std::lock_guard lock(g_mutex);
  auto it = g_blocks.find(address);
  if (it == g_blocks.end()) return CUDA_ERROR_INVALID_VALUE;
  if (it->second.device >= 0) g_used[it->second.device] -= it->second.size;
  if (it->second.pool) g_pool_used[it->second.pool] -= it->second.size;
  g_blocks.erase(it);
  return CUDA_SUCCESS;
}

CUresult host_allocate(uint64_t size, void** out) {
  if (!out || size == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(g_mutex);
  uint64_t address = g_next_host;
  g_next_host += round_up(size, 4096);
  g_blocks[address] = Block{size, -1, 0};
  *out = reinterpret_cast<void*>(address);
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

void gmt_fake_cuda_attach_cupti(GmtFakeCuptiRaise raise) { g_raise = raise; }
int gmt_fake_cuda_device_of_context(CUcontext context) { return device_of(context); }

// ---- initialization, contexts, devices ---------------------------------------------------------------------

CUresult cuInit(unsigned int) { return CUDA_SUCCESS; }

CUresult cuCtxGetCurrent(CUcontext* context) {
  if (!context) return CUDA_ERROR_INVALID_VALUE;
  *context = t_current;
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext context) {
  if (device_of(context) < 0) return CUDA_ERROR_INVALID_CONTEXT;
  t_current = context;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice* device) {
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (current_device() < 0) return CUDA_ERROR_INVALID_CONTEXT;
  *device = current_device();
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (!device || ordinal < 0 || ordinal >= kDevices) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  if (!name || device < 0 || device >= kDevices) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(name, static_cast<size_t>(length), "Fake GPU %d (gpumemtrace test fixture)", device);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice device) {
  if (!uuid || device < 0 || device >= kDevices) return CUDA_ERROR_INVALID_VALUE;
  for (int i = 0; i < 16; ++i) uuid->bytes[i] = static_cast<char>(0x10 * device + i);
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice device) {
  if (!bytes || device < 0 || device >= kDevices) return CUDA_ERROR_INVALID_VALUE;
  *bytes = kDeviceBytes;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char* id, int length, CUdevice device) {
  if (!id || device < 0 || device >= kDevices) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(id, static_cast<size_t>(length), "0000:%02x:00.0", 0x10 + device);
  return CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  int device = current_device();
  if (device < 0 || !free_bytes || !total_bytes) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard lock(g_mutex);
  *free_bytes = kDeviceBytes - g_used[device];
  *total_bytes = kDeviceBytes;
  return CUDA_SUCCESS;
}

// ---- allocations and frees ---------------------------------------------------------------------------------

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  return GMT_TRACED(cuMemAlloc_v2, dptr, bytesize) { return allocate(current_device(), bytesize, 0, dptr); });
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes) {
  return GMT_TRACED(cuMemAllocPitch_v2, dptr, pPitch, WidthInBytes, Height, ElementSizeBytes) {
    if (!pPitch || Height == 0) return CUDA_ERROR_INVALID_VALUE;
    uint64_t pitch = round_up(WidthInBytes, 512);
    CUresult result = allocate(current_device(), pitch * Height, 0, dptr);
    if (result == CUDA_SUCCESS) *pPitch = pitch;
    return result;
  });
}

// GMT_TRACED's lambda reads as a statement to clang-format, which would join it into a line over 120 columns.
// clang-format off
CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  return GMT_TRACED(cuMemAllocManaged, dptr, bytesize, flags) {
    return allocate(current_device(), bytesize, 0, dptr);
  });
}
// clang-format on

CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
  return GMT_TRACED(cuMemAllocHost_v2, pp, bytesize) { return host_allocate(bytesize, pp); });
}

CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
  return GMT_TRACED(cuMemHostAlloc, pp, bytesize, Flags) { return host_allocate(bytesize, pp); });
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  return GMT_TRACED(cuMemFree_v2, dptr) { return dptr == 0 ? CUDA_SUCCESS : release(dptr); });
}

CUresult cuMemFreeHost(void* p) {
  return GMT_TRACED(cuMemFreeHost, p) { return release(reinterpret_cast<uint64_t>(p)); });
}

// ---- stream-ordered allocations and pools ------------------------------------------------------------------

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  return GMT_TRACED(cuMemAllocAsync, dptr, bytesize, hStream) {
    return allocate(current_device(), bytesize, default_pool(current_device()), dptr);
  });
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  return GMT_TRACED(cuMemAllocAsync_ptsz, dptr, bytesize, hStream) {
    return allocate(current_device(), bytesize, default_pool(current_device()), dptr);
  });
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  return GMT_TRACED(cuMemAllocFromPoolAsync, dptr, bytesize, pool, hStream) {
    auto it = g_pools.find(reinterpret_cast<uint64_t>(pool));
    if (it == g_pools.end()) return CUDA_ERROR_INVALID_VALUE;
    return allocate(it->second, bytesize, it->first, dptr);
  });
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  return GMT_TRACED(cuMemAllocFromPoolAsync_ptsz, dptr, bytesize, pool, hStream) {
    auto it = g_pools.find(reinterpret_cast<uint64_t>(pool));
    if (it == g_pools.end()) return CUDA_ERROR_INVALID_VALUE;
    return allocate(it->second, bytesize, it->first, dptr);
  });
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  return GMT_TRACED(cuMemFreeAsync, dptr, hStream) { return release(dptr); });
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  return GMT_TRACED(cuMemFreeAsync_ptsz, dptr, hStream) { return release(dptr); });
}

CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice device) {
  if (!pool || device < 0 || device >= kDevices) return CUDA_ERROR_INVALID_VALUE;
  *pool = reinterpret_cast<CUmemoryPool>(default_pool(device));
  return CUDA_SUCCESS;
}

CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* poolProps) {
  return GMT_TRACED(cuMemPoolCreate, pool, poolProps) {
    if (!pool || !poolProps || poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard lock(g_mutex);
    uint64_t handle = g_next_pool++;
    g_pools[handle] = poolProps->location.id;
    *pool = reinterpret_cast<CUmemoryPool>(handle);
    return CUDA_SUCCESS;
  });
}

CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  return GMT_TRACED(cuMemPoolDestroy, pool) {
    std::lock_guard lock(g_mutex);
    return g_pools.erase(reinterpret_cast<uint64_t>(pool)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  });
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  return GMT_TRACED(cuMemPoolTrimTo, pool, minBytesToKeep) { return CUDA_SUCCESS; });
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attribute, void* value) {
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(g_mutex);
  auto handle = reinterpret_cast<uint64_t>(pool);
  if (attribute == CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) {
    *static_cast<cuuint64_t*>(value) = kPoolReservedBytes;
  } else if (attribute == CU_MEMPOOL_ATTR_USED_MEM_CURRENT) {
    *static_cast<cuuint64_t*>(value) = g_pool_used[handle];
  } else {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  return CUDA_SUCCESS;
}

// ---- virtual memory management -----------------------------------------------------------------------------

CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
  return GMT_TRACED(cuMemAddressReserve, ptr, size, alignment, addr, flags) {
    if (!ptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard lock(g_mutex);
    *ptr = g_next_virtual;
    g_next_virtual += round_up(size, uint64_t{2} << 20);
    return CUDA_SUCCESS;
  });
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  return GMT_TRACED(cuMemAddressFree, ptr, size) { return CUDA_SUCCESS; });
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                     unsigned long long flags) {
  return GMT_TRACED(cuMemCreate, handle, size, prop, flags) {
    if (!handle || !prop || size == 0) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard lock(g_mutex);
    *handle = g_next_handle++;
    g_handles[*handle] = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : -1;
    return CUDA_SUCCESS;
  });
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  return GMT_TRACED(cuMemRelease, handle) {
    std::lock_guard lock(g_mutex);
    return g_handles.erase(handle) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  });
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  return GMT_TRACED(cuMemMap, ptr, size, offset, handle, flags) {
    std::lock_guard lock(g_mutex);
    return g_handles.count(handle) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  });
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  return GMT_TRACED(cuMemUnmap, ptr, size) { return CUDA_SUCCESS; });
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle) {
  if (!prop) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(g_mutex);
  auto it = g_handles.find(handle);
  if (it == g_handles.end()) return CUDA_ERROR_INVALID_VALUE;
  *prop = CUmemAllocationProp{};
  prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop->location.type = it->second >= 0 ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST;
  prop->location.id = it->second;
  return CUDA_SUCCESS;
}

// ---- memory imported from other processes ------------------------------------------------------------------
// An opened IPC handle maps 1 MiB of "another process's" memory on the opening context's device; an imported
// shareable handle is physical memory on device 1.

CUresult open_ipc(CUdeviceptr* pdptr) {
  if (!pdptr || current_device() < 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(g_mutex);
  uint64_t address = g_next_ipc;
  g_next_ipc += uint64_t{1} << 20;
  g_blocks[address] = Block{uint64_t{1} << 20, current_device(), 0};
  *pdptr = address;
  return CUDA_SUCCESS;
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int Flags) {
  return GMT_TRACED(cuIpcOpenMemHandle_v2, pdptr, handle, Flags) { return open_ipc(pdptr); });
}

CUresult cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int Flags) {
  return GMT_TRACED(cuIpcOpenMemHandle, pdptr, handle, Flags) { return open_ipc(pdptr); });
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  return GMT_TRACED(cuIpcCloseMemHandle, dptr) {
    std::lock_guard lock(g_mutex);
    return g_blocks.erase(dptr) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  });
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle,
                                        CUmemAllocationHandleType shHandleType) {
  return GMT_TRACED(cuMemImportFromShareableHandle, handle, osHandle, shHandleType) {
    if (!handle) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard lock(g_mutex);
    *handle = g_next_handle++;
    g_handles[*handle] = 1;
    return CUDA_SUCCESS;
  });
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr address) {
  std::lock_guard lock(g_mutex);
  auto it = g_blocks.upper_bound(address);
  if (it == g_blocks.begin()) return CUDA_ERROR_NOT_FOUND;
  --it;
  if (address >= it->first + it->second.size) return CUDA_ERROR_NOT_FOUND;
  if (base) *base = it->first;
  if (size) *size = it->second.size;
  return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr address) {
  if (attribute != CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL || !data) return CUDA_ERROR_NOT_SUPPORTED;
  std::lock_guard lock(g_mutex);
  auto it = g_blocks.upper_bound(address);
  if (it == g_blocks.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  if (address >= it->first + it->second.size || it->second.device < 0) return CUDA_ERROR_INVALID_VALUE;
  *static_cast<int*>(data) = it->second.device;
  return CUDA_SUCCESS;
}

// ---- entry points ------------------------------------------------------------------------------------------
// What cudart and cudaGetDriverEntryPoint* use: the driver's own function for a plain name (the newest version of
// it), never a lookup through the dynamic linker (which would find an interposed definition first).

void* own_function(const char* symbol) {
  struct Entry {
    const char* name;
    void* function;
  };
  static const Entry kEntries[] = {
      {"cuMemAlloc", reinterpret_cast<void*>(&cuMemAlloc_v2)},
      {"cuMemFree", reinterpret_cast<void*>(&cuMemFree_v2)},
      {"cuMemAllocAsync", reinterpret_cast<void*>(&cuMemAllocAsync)},
      {"cuMemFreeAsync", reinterpret_cast<void*>(&cuMemFreeAsync)},
      {"cuMemCreate", reinterpret_cast<void*>(&cuMemCreate)},
      {"cuMemRelease", reinterpret_cast<void*>(&cuMemRelease)},
  };
  for (const Entry& entry : kEntries) {
    if (std::strcmp(entry.name, symbol) == 0) return entry.function;
  }
  return nullptr;
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int, cuuint64_t, CUdriverProcAddressQueryResult* status) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  *pfn = own_function(symbol);
  if (status) *status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, nullptr);
}

}  // extern "C"
