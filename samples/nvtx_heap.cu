// A tiny sub-allocator that describes its work with the NVTX memory API (nvtx3/nvToolsExtMem.h), as RMM-style
// pools do: it cudaMallocs one arena, registers it as a heap, and hands out regions of it with a bump pointer.
// What it does, in order (sizes in bytes; offsets from the arena's start, regions 256-byte aligned):
//   heap   arena: 1 MiB, domain "sample.heap"
//   a      4096 at 0        registered by pointer, unregistered by pointer
//   b      8192 at 4096     registered by pointer, shrunk to 6144 (nvtxMemRegionsResize)
//   c      16384 at 12288   registered with a handle, unregistered by that handle
//   d      32768 at 28672   registered by pointer, freed by the reset
//   reset  the heap (nvtxMemHeapReset): frees b (6144) and d; the bump pointer goes back to 0
//   e      65536 at 0       registered by pointer from its own call site (keep_region), kept at exit (the one
//                           region the app still holds: it pins the arena's free bytes, which no reset can reuse)
//   f      1000 at 65536    registered and unregistered two at a time with g (one batch of 2)
//   g      3000 at 66560
//   scratch: a second heap of 64 KiB (its own cudaMalloc), one region of 512 left in it, then the heap is
//          unregistered (which frees that region) and its memory cudaFree'd.
// The arena stays allocated and its heap registered at exit, as a pool keeps its memory until the process ends.
// The last line says what the app held at exit, at block level:
//   heap truth: live_regions=1 live_region_bytes=65536 live_heaps=1 live_heap_bytes=1048576
// The functions are noinline so that each NVTX call keeps its caller's frame; the site markers (`...-SITE`)
// markers let tests find the line a stack must name.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExtMem.h>

#include <cstdio>

#include "sample_common.h"

namespace {

constexpr size_t kArenaBytes = size_t{1} << 20;
constexpr size_t kScratchBytes = size_t{64} << 10;
constexpr size_t kAlign = 256;

__global__ void fill(unsigned char* data, size_t n, unsigned char value) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) data[i] = value;
}

struct Pool {
  nvtxDomainHandle_t domain;
  char* base;
  size_t used;
  nvtxMemHeapHandle_t heap;
};

nvtxMemVirtualRangeDesc_t range_of(const void* ptr, size_t bytes) {
  nvtxMemVirtualRangeDesc_t range{};
  range.ptr = ptr;
  range.size = bytes;
  return range;
}

__attribute__((noinline)) nvtxMemHeapHandle_t register_heap(nvtxDomainHandle_t domain, void* base, size_t bytes) {
  nvtxMemVirtualRangeDesc_t range = range_of(base, bytes);
  nvtxMemHeapDesc_t desc{};
  desc.extCompatID = NVTX_EXT_COMPATID_MEM;
  desc.structSize = sizeof desc;
  desc.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
  desc.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  desc.typeSpecificDescSize = sizeof range;
  desc.typeSpecificDesc = &range;
  return nvtxMemHeapRegister(domain, &desc);  // HEAP-SITE
}

char* bump(Pool& pool, size_t bytes) {
  char* p = pool.base + pool.used;
  pool.used += (bytes + kAlign - 1) / kAlign * kAlign;
  if (pool.used > kArenaBytes) {
    std::fprintf(stderr, "nvtx_heap: arena exhausted\n");
    std::exit(1);
  }
  return p;
}

// Regions of `sizes` handed out in one nvtxMemRegionsRegister call; handles written to `handles` when given.
__attribute__((noinline)) void hand_out(Pool& pool, const size_t* sizes, char** out, size_t count,
                                        nvtxMemRegionHandle_t* handles) {
  nvtxMemVirtualRangeDesc_t ranges[4];
  for (size_t i = 0; i < count; ++i) {
    out[i] = bump(pool, sizes[i]);
    ranges[i] = range_of(out[i], sizes[i]);
  }
  nvtxMemRegionsRegisterBatch_t batch{};
  batch.extCompatID = NVTX_EXT_COMPATID_MEM;
  batch.structSize = sizeof batch;
  batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  batch.heap = pool.heap;
  batch.regionCount = count;
  batch.regionDescElementSize = sizeof(nvtxMemVirtualRangeDesc_t);
  batch.regionDescElements = ranges;
  batch.regionHandleElementsOut = handles;
  nvtxMemRegionsRegister(pool.domain, &batch);  // REGION-SITE
}

// A region the app keeps for the whole run, registered from its own line, so that the report's blocks pinning the
// heap's holes name this site (tests find it by its marker).
__attribute__((noinline)) char* keep_region(Pool& pool, size_t bytes) {
  char* p = bump(pool, bytes);
  nvtxMemVirtualRangeDesc_t range = range_of(p, bytes);
  nvtxMemRegionsRegisterBatch_t batch{};
  batch.extCompatID = NVTX_EXT_COMPATID_MEM;
  batch.structSize = sizeof batch;
  batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  batch.heap = pool.heap;
  batch.regionCount = 1;
  batch.regionDescElementSize = sizeof range;
  batch.regionDescElements = &range;
  nvtxMemRegionsRegister(pool.domain, &batch);  // KEEP-SITE
  return p;
}

char* hand_out_one(Pool& pool, size_t bytes, nvtxMemRegionHandle_t* handle = nullptr) {
  char* p = nullptr;
  hand_out(pool, &bytes, &p, 1, handle);
  return p;
}

void give_back(Pool& pool, const nvtxMemRegionRef_t* refs, size_t count, uint32_t ref_type) {
  nvtxMemRegionsUnregisterBatch_t batch{};
  batch.extCompatID = NVTX_EXT_COMPATID_MEM;
  batch.structSize = sizeof batch;
  batch.refType = ref_type;
  batch.refCount = count;
  batch.refElementSize = sizeof(nvtxMemRegionRef_t);
  batch.refElements = refs;
  nvtxMemRegionsUnregister(pool.domain, &batch);
}

void give_back_pointer(Pool& pool, const void* p) {
  nvtxMemRegionRef_t ref{};
  ref.pointer = p;
  give_back(pool, &ref, 1, NVTX_MEM_REGION_REF_TYPE_POINTER);
}

__attribute__((noinline)) void resize(Pool& pool, const void* p, size_t bytes) {
  nvtxMemVirtualRangeDesc_t range = range_of(p, bytes);
  nvtxMemRegionsResizeBatch_t batch{};
  batch.extCompatID = NVTX_EXT_COMPATID_MEM;
  batch.structSize = sizeof batch;
  batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  batch.regionDescCount = 1;
  batch.regionDescElementSize = sizeof range;
  batch.regionDescElements = &range;
  nvtxMemRegionsResize(pool.domain, &batch);  // RESIZE-SITE
}

}  // namespace

int main() {
  Pool pool{};
  pool.domain = nvtxDomainCreateA("sample.heap");
  SAMPLE_CHECK(cudaMalloc(reinterpret_cast<void**>(&pool.base), kArenaBytes));
  pool.heap = register_heap(pool.domain, pool.base, kArenaBytes);

  char* a = hand_out_one(pool, 4096);
  char* b = hand_out_one(pool, 8192);
  nvtxMemRegionHandle_t c_handle = nullptr;
  hand_out_one(pool, 16384, &c_handle);
  hand_out_one(pool, 32768);  // d: freed by the reset
  give_back_pointer(pool, a);
  resize(pool, b, 6144);
  nvtxMemRegionRef_t c_ref{};
  c_ref.handle = c_handle;
  give_back(pool, &c_ref, 1, NVTX_MEM_REGION_REF_TYPE_HANDLE);

  nvtxMemHeapReset(pool.domain, pool.heap);  // b and d
  pool.used = 0;

  char* e = keep_region(pool, 65536);  // kept at exit
  fill<<<65536 / 256, 256>>>(reinterpret_cast<unsigned char*>(e), 65536, 7);
  SAMPLE_CHECK(cudaGetLastError());
  SAMPLE_CHECK(cudaDeviceSynchronize());
  const size_t fg_sizes[2] = {1000, 3000};
  char* fg[2] = {};
  hand_out(pool, fg_sizes, fg, 2, nullptr);
  nvtxMemRegionRef_t fg_refs[2] = {};
  fg_refs[0].pointer = fg[0];
  fg_refs[1].pointer = fg[1];
  give_back(pool, fg_refs, 2, NVTX_MEM_REGION_REF_TYPE_POINTER);

  Pool scratch{};
  scratch.domain = pool.domain;
  SAMPLE_CHECK(cudaMalloc(reinterpret_cast<void**>(&scratch.base), kScratchBytes));
  scratch.heap = register_heap(scratch.domain, scratch.base, kScratchBytes);
  hand_out_one(scratch, 512);  // left in the heap: its unregister frees it
  nvtxMemHeapUnregister(scratch.domain, scratch.heap);
  SAMPLE_CHECK(cudaFree(scratch.base));

  std::printf("regions: a=%td b=%td e=%td f=%td g=%td (offsets in the arena)\n", a - pool.base, b - pool.base,
              e - pool.base, fg[0] - pool.base, fg[1] - pool.base);
  std::printf("heap truth: live_regions=1 live_region_bytes=65536 live_heaps=1 live_heap_bytes=%zu\n", kArenaBytes);
  return 0;
}
