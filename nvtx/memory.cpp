// NVTX's memory API (nvtx3/nvToolsExtMem.h): an allocator that describes its sub-allocations registers its arena
// as a heap (nvtxMemHeapRegister) and each piece it hands out as a region (nvtxMemRegionsRegister). We record them
// as PyTorch's blocks are recorded (recorder/framework_blocks.cpp), source NvtxMemory:
//   - a heap: SegmentAlloc / SegmentFree of its range, api nvtxMemHeapRegister / nvtxMemHeapUnregister;
//   - a region: Alloc / Free of memory kind HeapBlock, api nvtxMemRegionsRegister / nvtxMemRegionsUnregister,
//     with the heap's handle in the event's handle field and our normal stack taken at the register call;
//   - nvtxMemHeapReset: a Free of every region still in the heap (api nvtxMemHeapReset);
//   - nvtxMemHeapUnregister: a Free of every region still in it, then the heap's SegmentFree;
//   - nvtxMemRegionsResize: a Free (api nvtxMemRegionsUnregister) and an Alloc with the new size (api
//     nvtxMemRegionsRegister, the stack of the resize call): the schema has no api of its own for a resize.
// Memory the allocator took from CUDA stays counted at the CUDA level: heaps and regions only say where its blocks
// lie. Reset and unregister free regions the app does not name again, so we keep the live regions of each heap in
// a table of our own (under one mutex: the calls are an allocator's, not a kernel launch's hot path; no SQLite).
//
// Regions are named by pointer (NVTX_MEM_REGION_REF_TYPE_POINTER: their start address) or by handle
// (NVTX_MEM_REGION_REF_TYPE_HANDLE: what the register call wrote to regionHandleElementsOut). Without a chained tool
// a region's handle is its start address and a heap's handle its base address, as nvToolsExtMem.h says a tool hands
// them out for virtual-address memory (a heap whose base is already a live heap's handle gets a unique handle of
// ours instead). With a chained tool the app gets that tool's handles, and we map them back.
//
// Not recorded (the call still reaches the chained tool): regions of NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE or of a heap
// we never saw registered (they lie in no heap, so the allocation they belong to is the CUDA-level one), regions
// outside their heap's range, memory types other than NVTX_MEM_TYPE_VIRTUAL_ADDRESS (the only one NVTX defines),
// and whatever runs under the recursion guard or in gpumemtrace's own domain. Bad arguments (null descriptors,
// structures smaller than NVTX's v1 layout, unknown handles, zero counts) are passed on and recorded as nothing.
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "nvtx/chain.h"
#include "nvtx/registry.h"
#include "recorder/driver_queries.h"
#include "recorder/event.h"
#include "recorder/guard.h"
#include "recorder/recorder.h"
#include "recorder/settings.h"

#include <nvtx3/nvToolsExtMem.h>  // after chain.h, which sets NVTX_NO_IMPL

namespace gmt::nvtx {

std::atomic<const MemChain*> g_mem_chain{nullptr};

namespace {

using recorder::EventRecord;
using recorder::HookScope;
using schema::Api;
using schema::EventKind;

using HeapRegisterFn = nvtxMemHeapHandle_t(NVTX_API*)(nvtxDomainHandle_t, const nvtxMemHeapDesc_t*);
using HeapFn = void(NVTX_API*)(nvtxDomainHandle_t, nvtxMemHeapHandle_t);
using RegionsRegisterFn = void(NVTX_API*)(nvtxDomainHandle_t, const nvtxMemRegionsRegisterBatch_t*);
using RegionsResizeFn = void(NVTX_API*)(nvtxDomainHandle_t, const nvtxMemRegionsResizeBatch_t*);
using RegionsUnregisterFn = void(NVTX_API*)(nvtxDomainHandle_t, const nvtxMemRegionsUnregisterBatch_t*);

template <typename F>
F chained(MemCallback c) {
  const MemChain* chain_now = mem_chain();
  return chain_now ? chain_now->get<F>(c) : nullptr;
}

// ---- Reading the app's structures ----

// Whether a structure of `struct_size` bytes (as the app set it) holds `field`, which ends at `end`. NVTX's own
// samples always set the size; 0 is read as the v1 layout this file is built against.
bool holds(uint16_t struct_size, size_t end) { return struct_size == 0 || struct_size >= end; }

#define GMT_END_OF(type, field) (offsetof(type, field) + sizeof(type::field))

struct Range {
  uint64_t address = 0;
  uint64_t size = 0;
};

// The i-th virtual range of an array of elements `stride` bytes apart (0: packed), or false.
bool range_at(const void* elements, size_t stride, size_t i, Range& out) {
  if (!elements) return false;
  if (stride == 0) stride = sizeof(nvtxMemVirtualRangeDesc_t);
  if (stride < sizeof(nvtxMemVirtualRangeDesc_t)) return false;
  const auto* desc =
      reinterpret_cast<const nvtxMemVirtualRangeDesc_t*>(static_cast<const char*>(elements) + i * stride);
  out.address = reinterpret_cast<uint64_t>(desc->ptr);
  out.size = desc->size;
  return true;
}

// ---- The live heaps and regions ----

struct Region {
  uint64_t size;
  uint64_t handle;  // the app's handle of it, when not its address (a chained tool's); 0 otherwise
};

struct Heap {
  uint64_t base;
  uint64_t size;
  int16_t device;
  std::unordered_map<uint64_t, Region> regions;  // start address -> region
};

// All under g_mutex, never destroyed (an allocator may still release its arena from a static destructor). Events
// are recorded under it too, so that a reset on one thread and an unregister on another never free a region twice.
std::mutex g_mutex;
auto* g_heaps = new std::unordered_map<uint64_t, Heap>;               // the app's heap handle -> heap
auto* g_region_heap = new std::unordered_map<uint64_t, uint64_t>;     // region start -> its heap's handle
auto* g_region_handles = new std::unordered_map<uint64_t, uint64_t>;  // a chained tool's region handle -> start

// A fork while another thread holds the mutex must not leave it held in the child.
void lock_for_fork() { g_mutex.lock(); }
void unlock_after_fork() { g_mutex.unlock(); }
std::once_flag g_atfork_once;

std::unique_lock<std::mutex> lock_tables() {
  std::call_once(g_atfork_once, [] { pthread_atfork(lock_for_fork, unlock_after_fork, unlock_after_fork); });
  return std::unique_lock(g_mutex);
}

// Unique heap handles of ours, for a heap whose base address is already taken as a live heap's handle: addresses
// in this reserved block (bss, never touched), so none can equal an allocator's memory.
constexpr size_t kFakeHeapHandles = size_t{1} << 16;
alignas(16) char g_fake_heap_space[kFakeHeapHandles];
size_t g_next_fake_heap = 0;  // under g_mutex

// ---- Events ----

EventRecord memory_event(EventKind kind, Api api, int16_t device, uint64_t address, uint64_t size,
                         uint64_t heap_handle) {
  EventRecord e;
  e.time_ns = recorder::now_ns();
  e.thread_id = recorder::current_thread_id();
  e.kind = kind;
  e.api = api;
  e.source = schema::Source::NvtxMemory;
  e.memory_kind = schema::MemoryKind::HeapBlock;
  e.device = device;
  e.call.address = address;
  e.call.size = size;
  e.call.handle = heap_handle;
  return e;
}

void record_region_alloc(const Heap& heap, uint64_t heap_handle, uint64_t address, uint64_t size, Api api) {
  EventRecord e = memory_event(EventKind::Alloc, api, heap.device, address, size, heap_handle);
  recorder::record(e, /*take_stack=*/true);
}

void record_region_free(const Heap& heap, uint64_t heap_handle, uint64_t address, Api api) {
  EventRecord e = memory_event(EventKind::Free, api, heap.device, address, 0, heap_handle);
  recorder::record(e, recorder::settings().take_free_stacks);
}

// Forgets one live region (found by its start), recording its Free. False when no heap of ours holds it.
bool free_region(uint64_t address, Api api) {
  auto owner = g_region_heap->find(address);
  if (owner == g_region_heap->end()) return false;
  auto heap = g_heaps->find(owner->second);
  if (heap != g_heaps->end()) {
    auto region = heap->second.regions.find(address);
    if (region != heap->second.regions.end()) {
      if (region->second.handle != 0) g_region_handles->erase(region->second.handle);
      heap->second.regions.erase(region);
      record_region_free(heap->second, heap->first, address, api);
    }
  }
  g_region_heap->erase(owner);
  return true;
}

// Frees every region still in `heap`, lowest address first (so that a trace reads the same in every run).
void free_all_regions(uint64_t heap_handle, Heap& heap, Api api) {
  std::vector<uint64_t> starts;
  starts.reserve(heap.regions.size());
  for (const auto& [start, region] : heap.regions) {
    starts.push_back(start);
    if (region.handle != 0) g_region_handles->erase(region.handle);
    g_region_heap->erase(start);
  }
  std::sort(starts.begin(), starts.end());
  for (uint64_t start : starts) record_region_free(heap, heap_handle, start, api);
  heap.regions.clear();
}

void unregister_heap(std::unordered_map<uint64_t, Heap>::iterator it) {
  free_all_regions(it->first, it->second, Api::nvtxMemHeapUnregister);
  EventRecord e = memory_event(EventKind::SegmentFree, Api::nvtxMemHeapUnregister, it->second.device, it->second.base,
                               it->second.size, it->first);
  recorder::record(e, /*take_stack=*/false);
  g_heaps->erase(it);
}

// Adds one region to a heap of ours; `handle`: the app's handle for it when not its start.
void add_region(uint64_t heap_handle, Heap& heap, const Range& range, uint64_t handle, Api api) {
  // The same start registered again without its unregister: the newer region replaces the older (whose Free
  // is recorded, so that every Alloc in the trace has at most one Free).
  free_region(range.address, api);
  heap.regions[range.address] = Region{range.size, handle};
  (*g_region_heap)[range.address] = heap_handle;
  if (handle != 0) (*g_region_handles)[handle] = range.address;
  record_region_alloc(heap, heap_handle, range.address, range.size, api);
}

// Whether the app's domain is one we record in (not gpumemtrace's own), and the handle to forward.
struct DomainCall {
  bool record;
  nvtxDomainHandle_t forward;
};
DomainCall domain_call(const HookScope& scope, nvtxDomainHandle_t domain) {
  DomainInfo d = find_domain(domain);
  return DomainCall{scope.active() && !d.own, d.fake ? nullptr : domain};
}

// ---- The handlers ----

nvtxMemHeapHandle_t NVTX_API on_heap_register(nvtxDomainHandle_t domain, const nvtxMemHeapDesc_t* desc) {
  HookScope scope;
  DomainCall call = domain_call(scope, domain);
  auto f = chained<HeapRegisterFn>(MemCallback::HeapRegister);
  nvtxMemHeapHandle_t chained_handle = f ? f(call.forward, desc) : nullptr;
  // NVTX_MEM_HEAP_HANDLE_NO_TOOL (-1; the macro itself does not compile as C++): a tool that made no heap.
  if (reinterpret_cast<intptr_t>(chained_handle) == -1) chained_handle = nullptr;

  Range range;
  bool valid = desc && holds(desc->structSize, GMT_END_OF(nvtxMemHeapDesc_t, typeSpecificDesc)) &&
               desc->type == NVTX_MEM_TYPE_VIRTUAL_ADDRESS &&
               (desc->typeSpecificDescSize == 0 || desc->typeSpecificDescSize >= sizeof(nvtxMemVirtualRangeDesc_t)) &&
               range_at(desc->typeSpecificDesc, 0, 0, range) && range.address != 0 && range.size != 0;
  if (!valid) return chained_handle;  // nothing we could name: the app gets what NVTX without us gives

  // The device the arena lives on (-1: host memory, or the driver cannot say). Once per heap, not per region.
  int16_t device = call.record ? recorder::describe_imported(range.address).device : int16_t{-1};
  recorder::NeverWaitScope never_wait;  // the allocator may hold its own lock: drop and count rather than wait
  auto lock = lock_tables();
  uint64_t handle = reinterpret_cast<uint64_t>(chained_handle);
  if (handle == 0) {
    handle = range.address;
    if (g_heaps->count(handle) && g_next_fake_heap < kFakeHeapHandles) {
      handle = reinterpret_cast<uint64_t>(&g_fake_heap_space[g_next_fake_heap++]);
    }
  }
  if (!call.record) return reinterpret_cast<nvtxMemHeapHandle_t>(handle);
  // A handle still live (a chained tool that reuses handles, or fake handles run out): that heap ended unseen.
  if (auto old = g_heaps->find(handle); old != g_heaps->end()) unregister_heap(old);
  Heap& heap = (*g_heaps)[handle];
  heap.base = range.address;
  heap.size = range.size;
  heap.device = device;
  EventRecord e =
      memory_event(EventKind::SegmentAlloc, Api::nvtxMemHeapRegister, device, range.address, range.size, handle);
  recorder::record(e, /*take_stack=*/true);  // where the allocator made its arena
  return reinterpret_cast<nvtxMemHeapHandle_t>(handle);
}

void NVTX_API on_heap_unregister(nvtxDomainHandle_t domain, nvtxMemHeapHandle_t heap) {
  HookScope scope;
  DomainCall call = domain_call(scope, domain);
  if (call.record && heap != NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE) {
    recorder::NeverWaitScope never_wait;
    auto lock = lock_tables();
    if (auto it = g_heaps->find(reinterpret_cast<uint64_t>(heap)); it != g_heaps->end()) unregister_heap(it);
  }
  if (auto f = chained<HeapFn>(MemCallback::HeapUnregister)) f(call.forward, heap);
}

void NVTX_API on_heap_reset(nvtxDomainHandle_t domain, nvtxMemHeapHandle_t heap) {
  HookScope scope;
  DomainCall call = domain_call(scope, domain);
  if (call.record && heap != NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE) {
    recorder::NeverWaitScope never_wait;
    auto lock = lock_tables();
    if (auto it = g_heaps->find(reinterpret_cast<uint64_t>(heap)); it != g_heaps->end()) {
      free_all_regions(it->first, it->second, Api::nvtxMemHeapReset);
    }
  }
  if (auto f = chained<HeapFn>(MemCallback::HeapReset)) f(call.forward, heap);
}

void NVTX_API on_regions_register(nvtxDomainHandle_t domain, const nvtxMemRegionsRegisterBatch_t* desc) {
  HookScope scope;
  DomainCall call = domain_call(scope, domain);
  auto f = chained<RegionsRegisterFn>(MemCallback::RegionsRegister);
  bool valid = desc && holds(desc->structSize, GMT_END_OF(nvtxMemRegionsRegisterBatch_t, regionHandleElementsOut)) &&
               desc->regionType == NVTX_MEM_TYPE_VIRTUAL_ADDRESS && desc->regionDescElements;
  nvtxMemRegionHandle_t* handles_out = valid ? desc->regionHandleElementsOut : nullptr;
  // An output array: cleared first, so that a handle the chained tool leaves unset is seen as such.
  for (size_t i = 0; handles_out && i < desc->regionCount; ++i) handles_out[i] = nullptr;
  if (f) f(call.forward, desc);  // before we read the handles: the app gets the tool's
  if (!valid) return;
  // Without a chained tool (or where it set none) a region's handle is its start address.
  for (size_t i = 0; handles_out && i < desc->regionCount; ++i) {
    Range range;
    if (!handles_out[i] && range_at(desc->regionDescElements, desc->regionDescElementSize, i, range)) {
      handles_out[i] = reinterpret_cast<nvtxMemRegionHandle_t>(range.address);
    }
  }
  if (!call.record || desc->regionCount == 0) return;
  recorder::NeverWaitScope never_wait;
  auto lock = lock_tables();
  auto heap = g_heaps->find(reinterpret_cast<uint64_t>(desc->heap));
  if (heap == g_heaps->end()) return;
  for (size_t i = 0; i < desc->regionCount; ++i) {
    Range range;
    if (!range_at(desc->regionDescElements, desc->regionDescElementSize, i, range)) return;
    const Heap& h = heap->second;
    if (range.address < h.base || range.address - h.base > h.size || range.size > h.size - (range.address - h.base)) {
      continue;  // not inside its heap: no block of this heap
    }
    uint64_t handle = handles_out ? reinterpret_cast<uint64_t>(handles_out[i]) : 0;
    add_region(heap->first, heap->second, range, handle == range.address ? 0 : handle, Api::nvtxMemRegionsRegister);
  }
}

void NVTX_API on_regions_resize(nvtxDomainHandle_t domain, const nvtxMemRegionsResizeBatch_t* desc) {
  HookScope scope;
  DomainCall call = domain_call(scope, domain);
  if (call.record && desc && holds(desc->structSize, GMT_END_OF(nvtxMemRegionsResizeBatch_t, regionDescElements)) &&
      desc->regionType == NVTX_MEM_TYPE_VIRTUAL_ADDRESS) {
    recorder::NeverWaitScope never_wait;
    auto lock = lock_tables();
    for (size_t i = 0; i < desc->regionDescCount; ++i) {
      Range range;
      if (!range_at(desc->regionDescElements, desc->regionDescElementSize, i, range)) break;
      auto owner = g_region_heap->find(range.address);
      if (owner == g_region_heap->end()) continue;
      auto heap = g_heaps->find(owner->second);
      if (heap == g_heaps->end()) continue;
      const Heap& h = heap->second;
      if (range.size > h.size - (range.address - h.base)) continue;  // would end past its heap: left as it was
      auto region = heap->second.regions.find(range.address);
      uint64_t handle = region == heap->second.regions.end() ? 0 : region->second.handle;
      free_region(range.address, Api::nvtxMemRegionsUnregister);
      add_region(heap->first, heap->second, range, handle, Api::nvtxMemRegionsRegister);
    }
  }
  if (auto f = chained<RegionsResizeFn>(MemCallback::RegionsResize)) f(call.forward, desc);
}

void NVTX_API on_regions_unregister(nvtxDomainHandle_t domain, const nvtxMemRegionsUnregisterBatch_t* desc) {
  HookScope scope;
  DomainCall call = domain_call(scope, domain);
  if (call.record && desc && holds(desc->structSize, GMT_END_OF(nvtxMemRegionsUnregisterBatch_t, refElements)) &&
      desc->refElements &&
      (desc->refType == NVTX_MEM_REGION_REF_TYPE_POINTER || desc->refType == NVTX_MEM_REGION_REF_TYPE_HANDLE)) {
    size_t stride = desc->refElementSize == 0 ? sizeof(nvtxMemRegionRef_t) : desc->refElementSize;
    if (stride >= sizeof(nvtxMemRegionRef_t)) {
      recorder::NeverWaitScope never_wait;
      auto lock = lock_tables();
      for (size_t i = 0; i < desc->refCount; ++i) {
        const auto* ref =
            reinterpret_cast<const nvtxMemRegionRef_t*>(reinterpret_cast<const char*>(desc->refElements) + i * stride);
        uint64_t start = desc->refType == NVTX_MEM_REGION_REF_TYPE_POINTER ? reinterpret_cast<uint64_t>(ref->pointer)
                                                                           : reinterpret_cast<uint64_t>(ref->handle);
        if (desc->refType == NVTX_MEM_REGION_REF_TYPE_HANDLE) {
          // A chained tool's handle maps to the start; without one the handle is the start.
          if (auto it = g_region_handles->find(start); it != g_region_handles->end()) start = it->second;
        }
        free_region(start, Api::nvtxMemRegionsUnregister);  // unknown: nothing of ours
      }
    }
  }
  if (auto f = chained<RegionsUnregisterFn>(MemCallback::RegionsUnregister)) f(call.forward, desc);
}

#undef GMT_END_OF

// Indexed by MemCallback: keep in its order.
const HandledSlot kHandled[kMemCallbacks] = {
    {NVTX3EXT_CBID_nvtxMemHeapRegister, reinterpret_cast<intptr_t>(&on_heap_register)},
    {NVTX3EXT_CBID_nvtxMemHeapUnregister, reinterpret_cast<intptr_t>(&on_heap_unregister)},
    {NVTX3EXT_CBID_nvtxMemHeapReset, reinterpret_cast<intptr_t>(&on_heap_reset)},
    {NVTX3EXT_CBID_nvtxMemRegionsRegister, reinterpret_cast<intptr_t>(&on_regions_register)},
    {NVTX3EXT_CBID_nvtxMemRegionsResize, reinterpret_cast<intptr_t>(&on_regions_resize)},
    {NVTX3EXT_CBID_nvtxMemRegionsUnregister, reinterpret_cast<intptr_t>(&on_regions_unregister)},
};

}  // namespace

const HandledSlot* handled_memory_slots() { return kHandled; }

}  // namespace gmt::nvtx
