#include "recorder/driver_queries.h"

#include <cuda.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include "recorder/capture_safety.h"
#include "recorder/settings.h"

namespace gmt::recorder {
namespace {

struct DriverQueries {
  CUresult (*get_address_range)(CUdeviceptr*, size_t*, CUdeviceptr) = nullptr;
  CUresult (*get_pointer_attribute)(void*, CUpointer_attribute, CUdeviceptr) = nullptr;
  CUresult (*get_allocation_properties)(CUmemAllocationProp*, CUmemGenericAllocationHandle) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_get_name)(char*, int, CUdevice) = nullptr;
  CUresult (*device_get_uuid)(CUuuid*, CUdevice) = nullptr;
  CUresult (*device_total_mem)(size_t*, CUdevice) = nullptr;
  CUresult (*device_get_pci_bus_id)(char*, int, CUdevice) = nullptr;
};

using EntryPointFn = int (*)(const char*, void**, unsigned int, unsigned long long, int*);

// Exported names in libcuda (cuda.h maps the plain names to these versions); the simulator's entry point
// takes the plain name (it strips a _v2).
template <typename Fn>
void resolve(Fn& slot, void* library, EntryPointFn entry_point, const char* name) {
  void* found = nullptr;
  if (library) {
    found = dlsym(library, name);
  } else if (entry_point) {
    int status = 0;
    if (entry_point(name, &found, 13000, 0, &status) != 0) found = nullptr;
  }
  slot = reinterpret_cast<Fn>(found);
}

DriverQueries* load() {
  void* libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  EntryPointFn entry_point = nullptr;
  if (!libcuda && settings().simulated) {
    if (void* cudart = dlopen("libcudart.so.13", RTLD_LAZY | RTLD_NOLOAD)) {
      entry_point = reinterpret_cast<EntryPointFn>(dlsym(cudart, "cudaGetDriverEntryPointByVersion"));
      dlclose(cudart);  // the app holds its own reference; the pointers stay valid
    }
  }
  if (!libcuda && !entry_point) return nullptr;
  auto* q = new DriverQueries;
  resolve(q->get_address_range, libcuda, entry_point, "cuMemGetAddressRange_v2");
  resolve(q->get_pointer_attribute, libcuda, entry_point, "cuPointerGetAttribute");
  resolve(q->get_allocation_properties, libcuda, entry_point, "cuMemGetAllocationPropertiesFromHandle");
  resolve(q->device_get, libcuda, entry_point, "cuDeviceGet");
  resolve(q->device_get_name, libcuda, entry_point, "cuDeviceGetName");
  resolve(q->device_get_uuid, libcuda, entry_point, "cuDeviceGetUuid_v2");
  resolve(q->device_total_mem, libcuda, entry_point, "cuDeviceTotalMem_v2");
  resolve(q->device_get_pci_bus_id, libcuda, entry_point, "cuDeviceGetPCIBusId");
  if (libcuda) dlclose(libcuda);  // NOLOAD took a reference of its own; the app's keeps libcuda loaded
  return q;
}

// Resolved on first use once a driver (or the simulator) is there; a lookup that found nothing is retried
// next time. A racing thread may resolve a second copy: the loser's is leaked, never freed under a reader.
std::atomic<DriverQueries*> g_queries{nullptr};

const DriverQueries* queries() {
  if (DriverQueries* q = g_queries.load(std::memory_order_acquire)) return q;
  DriverQueries* q = load();
  if (!q) return nullptr;
  DriverQueries* expected = nullptr;
  if (!g_queries.compare_exchange_strong(expected, q, std::memory_order_acq_rel)) return expected;
  return q;
}

}  // namespace

ImportedRange describe_imported(uint64_t address) {
  ImportedRange range;
  const DriverQueries* q = queries();
  if (!q || address == 0) return range;
  RelaxedCaptureScope relaxed;
  CUdeviceptr base = 0;
  size_t size = 0;
  if (q->get_address_range && q->get_address_range(&base, &size, address) == CUDA_SUCCESS) {
    // An opened handle maps the exporter's whole allocation at the returned address; the rest of the range
    // from `address` is what this process can reach.
    range.size = static_cast<uint64_t>(base + size - address);
  }
  int ordinal = -1;
  if (q->get_pointer_attribute &&
      q->get_pointer_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, address) == CUDA_SUCCESS) {
    range.device = static_cast<int16_t>(ordinal);
  }
  return range;
}

int16_t device_of_vmm_handle(uint64_t handle) {
  const DriverQueries* q = queries();
  if (!q || !q->get_allocation_properties) return -1;
  RelaxedCaptureScope relaxed;
  CUmemAllocationProp prop{};
  if (q->get_allocation_properties(&prop, static_cast<CUmemGenericAllocationHandle>(handle)) != CUDA_SUCCESS) {
    return -1;
  }
  return prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE ? static_cast<int16_t>(prop.location.id) : int16_t{-1};
}

std::string format_gpu_uuid(const unsigned char (&bytes)[16]) {
  char text[64];
  int n = std::snprintf(text, sizeof text, "GPU-");
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text[n++] = '-';
    n += std::snprintf(text + n, sizeof text - static_cast<size_t>(n), "%02x", bytes[i]);
  }
  return std::string(text, static_cast<size_t>(n));
}

bool describe_device(int ordinal, DeviceDescription& out) {
  const DriverQueries* q = queries();
  if (!q || !q->device_get) return false;
  RelaxedCaptureScope relaxed;
  CUdevice device = 0;
  if (q->device_get(&device, ordinal) != CUDA_SUCCESS) return false;
  out = DeviceDescription{};
  out.ordinal = ordinal;
  char text[256] = {};
  if (q->device_get_name && q->device_get_name(text, sizeof text - 1, device) == CUDA_SUCCESS) out.name = text;
  CUuuid uuid{};
  if (q->device_get_uuid && q->device_get_uuid(&uuid, device) == CUDA_SUCCESS) {
    unsigned char bytes[16];
    std::memcpy(bytes, uuid.bytes, sizeof bytes);
    out.uuid = format_gpu_uuid(bytes);
  }
  size_t total = 0;
  if (q->device_total_mem && q->device_total_mem(&total, device) == CUDA_SUCCESS) {
    out.total_bytes = static_cast<int64_t>(total);
  }
  std::memset(text, 0, sizeof text);
  if (q->device_get_pci_bus_id && q->device_get_pci_bus_id(text, sizeof text - 1, device) == CUDA_SUCCESS) {
    out.pci_bus_id = text;
  }
  return true;
}

}  // namespace gmt::recorder
