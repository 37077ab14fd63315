// Memory shared between processes (cudaIpc*Mem*) and the driver entry points the runtime hands out
// (cudaGetDriverEntryPointByVersion), which is how a profiler under simulation asks what a real driver
// would answer: the size and device of an opened pointer, the name and UUID of a device.
//
// IPC across processes: the 64-byte handle carries the exporter's pid, device, address and size. Opening it
// in another process maps a fresh address range there (its contents are not shared: kernels never run, so
// nothing reads them) that stands for the exporter's memory on that device, as the real driver's mapping
// does. The exporter's memory stays allocated in the exporter's heap; the importer's heap is untouched.
#include <sys/mman.h>
#include <unistd.h>

#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <string_view>

#include "sim_runtime.h"

using gmt::sim::Classified;
using gmt::sim::finish;
using gmt::sim::Runtime;
using gmt::sim::Where;

namespace {

constexpr char kMagic[8] = {'G', 'M', 'T', 'S', 'I', 'M', 'I', 'P'};

// The handle's layout; fits in cudaIpcMemHandle_t's 64 bytes.
struct HandleData {
  char magic[8];
  std::int32_t pid;  // the exporter: a process cannot open its own handle, as with the real driver
  std::int32_t device;
  std::uint64_t address;
  std::uint64_t bytes;
};
static_assert(sizeof(HandleData) <= sizeof(cudaIpcMemHandle_t));

// A live device allocation (of any device) or an open import containing `address`: its start, size (as
// requested) and device.
struct Range {
  std::uintptr_t base = 0;
  std::size_t bytes = 0;
  int device = -1;
};

bool find_range(std::uintptr_t address, Range& out) {
  Runtime& rt = Runtime::get();
  for (int d = 0; d < rt.device_count(); ++d) {
    gmt::sim::Device* device = rt.device(d);
    std::lock_guard lock(device->mutex);
    if (!device->heap.in_range(address)) continue;
    auto allocation = device->heap.find_containing(address);
    if (!allocation) return false;
    out = {allocation->address, allocation->requested, d};
    return true;
  }
  std::lock_guard lock(rt.objects_mutex);
  auto it = rt.imports.upper_bound(address);
  if (it == rt.imports.begin()) return false;
  --it;
  if (address - it->first >= it->second.bytes) return false;
  out = {it->first, it->second.bytes, it->second.device};
  return true;
}

// ---- driver functions handed out by cudaGetDriverEntryPointByVersion ---------------------------------------

CUresult sim_cuMemGetAddressRange(CUdeviceptr* base, size_t* size, CUdeviceptr ptr) {
  Range range;
  if (!find_range(static_cast<std::uintptr_t>(ptr), range)) return CUDA_ERROR_NOT_FOUND;
  if (base) *base = range.base;
  if (size) *size = range.bytes;
  return CUDA_SUCCESS;
}

CUresult sim_cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  if (attribute != CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) return CUDA_ERROR_NOT_SUPPORTED;  // not simulated
  Range range;
  if (!find_range(static_cast<std::uintptr_t>(ptr), range)) return CUDA_ERROR_INVALID_VALUE;
  *static_cast<int*>(data) = range.device;
  return CUDA_SUCCESS;
}

bool valid_device(CUdevice device) { return Runtime::get().check_device(device) == cudaSuccess; }

CUresult sim_cuDeviceGet(CUdevice* device, int ordinal) {
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult sim_cuDeviceGetName(char* name, int length, CUdevice device) {
  if (!name || length <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<size_t>(length), "%s", gmt::sim::device_properties(device).name);
  return CUDA_SUCCESS;
}

CUresult sim_cuDeviceGetUuid(CUuuid* uuid, CUdevice device) {
  if (!uuid) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  const cudaDeviceProp prop = gmt::sim::device_properties(device);
  static_assert(sizeof(uuid->bytes) == sizeof(prop.uuid.bytes));
  std::memcpy(uuid->bytes, prop.uuid.bytes, sizeof(uuid->bytes));
  return CUDA_SUCCESS;
}

CUresult sim_cuDeviceTotalMem(size_t* bytes, CUdevice device) {
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = gmt::sim::device_properties(device).totalGlobalMem;
  return CUDA_SUCCESS;
}

CUresult sim_cuDeviceGetPCIBusId(char* bus_id, int length, CUdevice device) {
  if (!bus_id || length <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(bus_id, static_cast<size_t>(length), "0000:%02x:00.0", device + 1);  // as cudaDeviceGetPCIBusId
  return CUDA_SUCCESS;
}

struct EntryPoint {
  const char* name;  // as callers ask for it: the base name, without _v2
  void* function;
};

const EntryPoint kEntryPoints[] = {
    {"cuMemGetAddressRange", reinterpret_cast<void*>(&sim_cuMemGetAddressRange)},
    {"cuPointerGetAttribute", reinterpret_cast<void*>(&sim_cuPointerGetAttribute)},
    {"cuDeviceGet", reinterpret_cast<void*>(&sim_cuDeviceGet)},
    {"cuDeviceGetName", reinterpret_cast<void*>(&sim_cuDeviceGetName)},
    {"cuDeviceGetUuid", reinterpret_cast<void*>(&sim_cuDeviceGetUuid)},
    {"cuDeviceTotalMem", reinterpret_cast<void*>(&sim_cuDeviceTotalMem)},
    {"cuDeviceGetPCIBusId", reinterpret_cast<void*>(&sim_cuDeviceGetPCIBusId)},
};

}  // namespace

extern "C" {

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* devPtr) {
  if (handle == nullptr || devPtr == nullptr) return finish(cudaErrorInvalidValue);
  Range range;
  const auto address = reinterpret_cast<std::uintptr_t>(devPtr);
  const Classified c = Runtime::get().classify(devPtr, 0);
  // Only this process's own device allocations can be exported (not managed memory, not an import).
  if (c.where != Where::DeviceAllocation || c.kind != gmt::sim::MemoryKind::Device || !find_range(address, range)) {
    return finish(cudaErrorInvalidValue);
  }
  {
    std::lock_guard lock(Runtime::get().objects_mutex);
    if (Runtime::get().imports.count(range.base)) return finish(cudaErrorInvalidValue);
  }
  HandleData data{};
  std::memcpy(data.magic, kMagic, sizeof kMagic);
  data.pid = static_cast<std::int32_t>(getpid());
  data.device = range.device;
  data.address = range.base;
  data.bytes = range.bytes;
  *handle = cudaIpcMemHandle_t{};
  std::memcpy(handle->reserved, &data, sizeof data);
  return cudaSuccess;
}

cudaError_t cudaIpcOpenMemHandle(void** devPtr, cudaIpcMemHandle_t handle, unsigned int flags) {
  if (devPtr == nullptr || (flags & ~static_cast<unsigned>(cudaIpcMemLazyEnablePeerAccess)) != 0) {
    return finish(cudaErrorInvalidValue);
  }
  HandleData data{};
  std::memcpy(&data, handle.reserved, sizeof data);
  if (std::memcmp(data.magic, kMagic, sizeof kMagic) != 0 || data.bytes == 0) {
    return finish(cudaErrorInvalidResourceHandle);
  }
  if (data.pid == static_cast<std::int32_t>(getpid())) return finish(cudaErrorDeviceUninitialized);
  Runtime& rt = Runtime::get();
  if (const cudaError_t e = rt.check_device(data.device); e != cudaSuccess) return finish(e);
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t mapped = (data.bytes + page - 1) / page * page;
  void* range = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (range == MAP_FAILED) return finish(cudaErrorMemoryAllocation);
  std::lock_guard lock(rt.objects_mutex);
  rt.imports[reinterpret_cast<std::uintptr_t>(range)] = gmt::sim::Import{data.device, data.bytes, mapped};
  *devPtr = range;
  return cudaSuccess;
}

cudaError_t cudaIpcCloseMemHandle(void* devPtr) {
  Runtime& rt = Runtime::get();
  std::lock_guard lock(rt.objects_mutex);
  auto it = rt.imports.find(reinterpret_cast<std::uintptr_t>(devPtr));
  if (it == rt.imports.end()) return finish(cudaErrorInvalidValue);
  munmap(devPtr, it->second.mapped_bytes);
  rt.imports.erase(it);
  return cudaSuccess;
}

// Hands out the simulated driver functions above; any other symbol is "not found", as a real driver
// says of a symbol it does not have.
cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr, unsigned int /*cudaVersion*/,
                                             unsigned long long /*flags*/,
                                             cudaDriverEntryPointQueryResult* driverStatus) {
  if (symbol == nullptr || funcPtr == nullptr) return finish(cudaErrorInvalidValue);
  std::string_view name(symbol);
  if (name.size() > 3 && name.substr(name.size() - 3) == "_v2") name.remove_suffix(3);
  *funcPtr = nullptr;
  for (const EntryPoint& entry : kEntryPoints) {
    if (name == entry.name) *funcPtr = entry.function;
  }
  if (driverStatus) *driverStatus = *funcPtr ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

}  // extern "C"
