// Two NVTX copies in one process (this program's and libnvtx_second_copy.so's), and this program's copy
// initialized a second time by hand: gpumemtrace must capture both copies, each once, and a second
// InitializeInjectionNvtx2 for a copy it already serves must change nothing (no double recording, no chaining
// into itself). Prints what push/pop returned. Last, one call of an NVTX extension (the memory API).
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>

#include <cstdio>

extern "C" int second_copy_ranges(int count);

int main() {
  std::printf("push outer %d\n", nvtxRangePushA("program outer"));
  std::printf("library level %d\n", second_copy_ranges(3));
  std::printf("pop outer %d\n", nvtxRangePop());

  // The preloaded gpumemtrace's entry point (absent in a plain run: then there is nothing to repeat).
  auto init = reinterpret_cast<NvtxInitializeInjectionNvtxFunc_t>(dlsym(RTLD_DEFAULT, "InitializeInjectionNvtx2"));
  if (init) std::printf("second init %d\n", init(NVTX_VERSIONED_IDENTIFIER(nvtxGetExportTable)));
  std::printf("push after %d\n", nvtxRangePushA("after second init"));
  std::printf("pop after %d\n", nvtxRangePop());

  // An NVTX extension (the memory API): a chained tool still gets the module and this call (a heap without an
  // address, which gpumemtrace does not record).
  nvtxMemVirtualRangeDesc_t range{};
  range.size = 4096;
  nvtxMemHeapDesc_t heap{};
  heap.extCompatID = NVTX_EXT_COMPATID_MEM;
  heap.structSize = sizeof heap;
  heap.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
  heap.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  heap.typeSpecificDescSize = sizeof range;
  heap.typeSpecificDesc = &range;
  nvtxMemHeapRegister(nvtxDomainCreateA("copies.mem"), &heap);
  return 0;
}
