// The NVTX memory API called the ways an application should not call it, then once correctly: gpumemtrace must
// pass every call through without crashing and record only what names a real heap or region. Host memory, no
// CUDA: heaps and regions need not be device memory. Prints "odd calls done" and, last, the two things the trace
// must hold: the heap of 8192 bytes and its one region of 100 bytes at offset 256.
#include <nvtx3/nvToolsExtMem.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

nvtxMemHeapDesc_t heap_desc(const nvtxMemVirtualRangeDesc_t* range) {
  nvtxMemHeapDesc_t desc{};
  desc.extCompatID = NVTX_EXT_COMPATID_MEM;
  desc.structSize = sizeof desc;
  desc.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
  desc.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  desc.typeSpecificDescSize = sizeof *range;
  desc.typeSpecificDesc = range;
  return desc;
}

nvtxMemRegionsRegisterBatch_t regions(nvtxMemHeapHandle_t heap, const nvtxMemVirtualRangeDesc_t* ranges, size_t n) {
  nvtxMemRegionsRegisterBatch_t batch{};
  batch.extCompatID = NVTX_EXT_COMPATID_MEM;
  batch.structSize = sizeof batch;
  batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  batch.heap = heap;
  batch.regionCount = n;
  batch.regionDescElementSize = sizeof *ranges;
  batch.regionDescElements = ranges;
  return batch;
}

nvtxMemRegionsUnregisterBatch_t refs(const nvtxMemRegionRef_t* elements, size_t n, uint32_t type) {
  nvtxMemRegionsUnregisterBatch_t batch{};
  batch.extCompatID = NVTX_EXT_COMPATID_MEM;
  batch.structSize = sizeof batch;
  batch.refType = type;
  batch.refCount = n;
  batch.refElementSize = sizeof *elements;
  batch.refElements = elements;
  return batch;
}

}  // namespace

int main() {
  nvtxDomainHandle_t domain = nvtxDomainCreateA("odd.mem");
  char* memory = static_cast<char*>(std::malloc(1 << 16));
  char* arena = memory + 4096;

  // Null descriptors, everywhere.
  nvtxMemHeapRegister(domain, nullptr);
  nvtxMemRegionsRegister(domain, nullptr);
  nvtxMemRegionsResize(domain, nullptr);
  nvtxMemRegionsUnregister(domain, nullptr);
  // Heaps that name nothing: no range, a null range, size 0, an unknown type, a structure too small.
  nvtxMemHeapDesc_t no_range = heap_desc(nullptr);
  nvtxMemHeapRegister(domain, &no_range);
  nvtxMemVirtualRangeDesc_t null_range{};
  null_range.size = 4096;
  nvtxMemHeapDesc_t null_heap = heap_desc(&null_range);
  nvtxMemHeapRegister(domain, &null_heap);
  nvtxMemVirtualRangeDesc_t empty_range{};
  empty_range.ptr = arena;
  nvtxMemHeapDesc_t empty_heap = heap_desc(&empty_range);
  nvtxMemHeapRegister(domain, &empty_heap);
  nvtxMemVirtualRangeDesc_t range{};
  range.ptr = arena;
  range.size = 8192;
  nvtxMemHeapDesc_t odd_type = heap_desc(&range);
  odd_type.type = 77;
  nvtxMemHeapRegister(domain, &odd_type);
  nvtxMemHeapDesc_t short_struct = heap_desc(&range);
  short_struct.structSize = 8;
  nvtxMemHeapRegister(domain, &short_struct);
  // Heaps that were never registered: unknown handles, the process-wide heap, null.
  auto* unknown = reinterpret_cast<nvtxMemHeapHandle_t>(memory + 100);
  nvtxMemHeapReset(domain, unknown);
  nvtxMemHeapUnregister(domain, unknown);
  nvtxMemHeapReset(domain, NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE);
  nvtxMemHeapUnregister(domain, NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE);
  nvtxMemVirtualRangeDesc_t piece{};
  piece.ptr = arena + 256;
  piece.size = 100;
  nvtxMemRegionsRegisterBatch_t in_unknown = regions(unknown, &piece, 1);
  nvtxMemRegionsRegister(domain, &in_unknown);
  nvtxMemRegionsRegisterBatch_t process_wide = regions(NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE, &piece, 1);
  nvtxMemRegionsRegister(domain, &process_wide);
  // Regions and refs that name nothing: zero counts, null arrays, unknown pointers and handles, odd ref types.
  nvtxMemRegionsRegisterBatch_t none = regions(unknown, &piece, 0);
  nvtxMemRegionsRegister(domain, &none);
  nvtxMemRegionsRegisterBatch_t null_elements = regions(unknown, nullptr, 3);
  nvtxMemRegionsRegister(domain, &null_elements);
  nvtxMemRegionRef_t ref{};
  ref.pointer = arena + 256;
  nvtxMemRegionsUnregisterBatch_t unknown_pointer = refs(&ref, 1, NVTX_MEM_REGION_REF_TYPE_POINTER);
  nvtxMemRegionsUnregister(domain, &unknown_pointer);
  nvtxMemRegionsUnregisterBatch_t unknown_handle = refs(&ref, 1, NVTX_MEM_REGION_REF_TYPE_HANDLE);
  nvtxMemRegionsUnregister(domain, &unknown_handle);
  nvtxMemRegionsUnregisterBatch_t odd_ref_type = refs(&ref, 1, 9);
  nvtxMemRegionsUnregister(domain, &odd_ref_type);
  nvtxMemRegionsUnregisterBatch_t null_refs = refs(nullptr, 5, NVTX_MEM_REGION_REF_TYPE_POINTER);
  nvtxMemRegionsUnregister(domain, &null_refs);
  nvtxMemRegionsUnregisterBatch_t no_refs = refs(&ref, 0, NVTX_MEM_REGION_REF_TYPE_POINTER);
  nvtxMemRegionsUnregister(domain, &no_refs);
  std::printf("odd calls done\n");

  // One real heap, and in it: a region past its end and one straddling its end (not recorded), an unknown resize,
  // a region unregistered twice, and the one region left at exit.
  nvtxMemHeapDesc_t good = heap_desc(&range);
  nvtxMemHeapHandle_t heap = nvtxMemHeapRegister(domain, &good);
  nvtxMemVirtualRangeDesc_t outside[2] = {};
  outside[0].ptr = arena + 9000;
  outside[0].size = 10;
  outside[1].ptr = arena + 8000;
  outside[1].size = 500;
  nvtxMemRegionsRegisterBatch_t out_of_heap = regions(heap, outside, 2);
  nvtxMemRegionsRegister(domain, &out_of_heap);
  nvtxMemRegionsResizeBatch_t resize{};
  resize.extCompatID = NVTX_EXT_COMPATID_MEM;
  resize.structSize = sizeof resize;
  resize.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  resize.regionDescCount = 1;
  resize.regionDescElementSize = sizeof piece;
  resize.regionDescElements = &piece;  // not registered yet
  nvtxMemRegionsResize(domain, &resize);
  nvtxMemVirtualRangeDesc_t twice{};
  twice.ptr = arena + 1024;
  twice.size = 64;
  nvtxMemRegionsRegisterBatch_t twice_batch = regions(heap, &twice, 1);
  nvtxMemRegionsRegister(domain, &twice_batch);
  nvtxMemRegionRef_t twice_ref{};
  twice_ref.pointer = arena + 1024;
  nvtxMemRegionsUnregisterBatch_t twice_unregister = refs(&twice_ref, 1, NVTX_MEM_REGION_REF_TYPE_POINTER);
  nvtxMemRegionsUnregister(domain, &twice_unregister);
  nvtxMemRegionsUnregister(domain, &twice_unregister);
  nvtxMemRegionsRegisterBatch_t kept = regions(heap, &piece, 1);
  nvtxMemRegionsRegister(domain, &kept);
  std::printf("heap 8192 at 4096, region 100 at 256 in it\n");
  return 0;
}
