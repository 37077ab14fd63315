// Virtual memory management by hand (cuMemCreate / cuMemAddressReserve / cuMemMap), as PyTorch's expandable
// segments do: physical memory is live until it is released AND unmapped. One handle is leaked on purpose
// (mapped, never released); one is released while still mapped (freed only at its unmap).
#include "driver_common.h"
#include "sample_common.h"

namespace {

CUmemAllocationProp device_memory(int device) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

__attribute__((noinline)) CUmemGenericAllocationHandle create_physical(const CUmemAllocationProp& prop, size_t bytes) {
  CUmemGenericAllocationHandle handle;
  DRIVER_CHECK(cuMemCreate(&handle, bytes, &prop, 0));  // LEAK-SITE: create_physical
  return handle;
}

void map_with_access(CUdeviceptr address, size_t bytes, CUmemGenericAllocationHandle handle, int device) {
  DRIVER_CHECK(cuMemMap(address, bytes, 0, handle, 0));
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  DRIVER_CHECK(cuMemSetAccess(address, bytes, &access, 1));
}

}  // namespace

int main() {
  use_primary_context_of_device0();

  CUmemAllocationProp prop = device_memory(0);
  size_t granularity = 0;
  DRIVER_CHECK(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  const size_t chunk = 2 * granularity;

  CUdeviceptr base = 0;
  DRIVER_CHECK(cuMemAddressReserve(&base, 4 * chunk, 0, 0, 0));
  CUmemGenericAllocationHandle freed = create_physical(prop, chunk);
  CUmemGenericAllocationHandle released_early = create_physical(prop, chunk);
  CUmemGenericAllocationHandle leaked = create_physical(prop, chunk);
  map_with_access(base, chunk, freed, 0);
  map_with_access(base + chunk, chunk, released_early, 0);
  map_with_access(base + 2 * chunk, chunk, leaked, 0);

  DRIVER_CHECK(cuMemRelease(released_early));  // still mapped: the memory stays until the unmap below
  DRIVER_CHECK(cuMemUnmap(base, chunk));
  DRIVER_CHECK(cuMemRelease(freed));
  DRIVER_CHECK(cuMemUnmap(base + chunk, chunk));
  // `leaked` stays mapped and is never released.

  LeakTruth truth;
  truth.leak(chunk);
  truth.print();
  std::printf("vmm: granularity=%zu chunk=%zu\n", granularity, chunk);
  return 0;
}
