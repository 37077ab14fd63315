// The rows of the driver catalog (recorder/driver_catalog.h): how one call of each catalogued driver function
// becomes events, written once for both driver-level backends. A row is an overload of on_driver_call() for the
// function's parameter struct, CUPTI's generated one (generated_cuda_meta.h: a header of the toolkit; no libcupti
// is loaded for it), so that the compiler checks each field name against the driver's signature:
//   - cupti/cupti_callbacks.cpp hands a row CUPTI's own struct (functionParams) at the call's entry and at its exit;
//   - interpose/driver_hooks.cpp packs its wrapper's arguments into the same struct and hands it to the row before
//     and after the real call.
// The row says on which side of the call its events belong (order, docs/design.md "Inside the process"):
// allocations and creations at exit, once the result is known; frees, releases, unmaps and destroys at entry,
// before the real call runs, since another thread can be handed the same address the moment it returns.
//
// A backend presents one side of one call to the rows as a small `Call` value with:
//   at_entry(), at_exit()                  which side of the call this is
//   result()                               the CUresult at exit (0 at entry: the call has not run yet)
//   driver_call(device, stream)            the recorder's view of the call (recorder/driver_events.h), on `device`,
//                                          or on the device of the calling thread's current context for
//                                          kDeviceOfContext (asked only then, and once)
//   memory_after_failure(MemoryKind)       cuMemGetInfo right after an out-of-memory failure, when it can ask
//   note_allocation()                      told of every allocation at exit (CUPTI's runtime naming)
// Everything here is a template resolved at compile time: a backend's wrapper or callback compiles to what it would
// be written out by hand (the hooks' side of a call that records nothing compiles to nothing), and a Call travels
// in registers where it can (the hooks' is an api and a result).
#pragma once

#include <cupti.h>  // cuda.h and generated_cuda_meta.h (the parameter structs), which has no include guard of its own

#include <cstdint>
#include <optional>
#include <type_traits>

#include "recorder/cache_hints.h"
#include "recorder/capture_safety.h"
#include "recorder/driver_catalog.h"
#include "recorder/driver_events.h"
#include "recorder/graph_memory.h"

namespace gmt::recorder::driver_calls {

using schema::EventKind;
using schema::MemoryKind;

// The schema::Api of a catalogued function, by its parameter struct.
template <typename Params>
struct Function;
#define GMT_DRIVER_FUNCTION(function, api)                \
  template <>                                             \
  struct Function<function##_params> {                    \
    static constexpr schema::Api kApi = schema::Api::api; \
  };
GMT_DRIVER_CATALOG(GMT_DRIVER_FUNCTION, GMT_DRIVER_CATALOG_SKIP)
#undef GMT_DRIVER_FUNCTION

// ---- how a call's parameters become an event --------------------------------------------------------------

// What an out-parameter holds after a successful call; 0 after a failed one (never read then: the driver may have
// left it unwritten).
template <typename Call, typename T>
uint64_t written(const Call& c, T* out) {
  if (c.result() != CUDA_SUCCESS || !out) return 0;
  if constexpr (std::is_pointer_v<T>) {
    return reinterpret_cast<uintptr_t>(*out);
  } else {
    return static_cast<uint64_t>(*out);
  }
}

// The device an event is recorded on when a Call is to ask the driver for the current context's.
inline constexpr int16_t kDeviceOfContext = -2;

// Where memory with this location lives: the device it names, -1 for the host; without one, the context's device.
inline int16_t device_at(const CUmemLocation* location) {
  if (!location) return kDeviceOfContext;
  return location->type == CU_MEM_LOCATION_TYPE_DEVICE ? static_cast<int16_t>(location->id) : int16_t{-1};
}

// Memory of this kind is on the context's device, except pinned host memory, which is on none.
inline int16_t device_of(MemoryKind kind) { return kind == MemoryKind::HostPinned ? int16_t{-1} : kDeviceOfContext; }

// At exit: Alloc, or AllocFailed with the size requested.
template <typename Call>
GMT_HOT void allocation(Call c, MemoryKind kind, uint64_t address, uint64_t size, CUstream stream = nullptr,
                        CUmemoryPool pool = nullptr) {
  if (!c.at_exit()) return;
  c.note_allocation();
  record_driver_alloc(c.driver_call(device_of(kind), stream), kind, address, size, reinterpret_cast<uint64_t>(pool),
                      c.memory_after_failure(kind));
}

// At entry, before the real free runs. Freeing null is a no-op, not a free.
template <typename Call>
GMT_HOT void deallocation(Call c, MemoryKind kind, uint64_t address, CUstream stream = nullptr) {
  if (!c.at_entry() || address == 0) return;
  record_driver_free(c.driver_call(device_of(kind), stream), kind, address);
}

// Rare calls (pools, VMM, IPC) are recorded by functions of their own: never inlined into a hot caller (CUPTI's
// callback is one), whose code must stay small (recorder/cache_hints.h).
#define GMT_DRIVER_RARE __attribute__((noinline))

template <typename Call>
GMT_DRIVER_RARE void record_pool_or_vmm_event(Call c, EventKind kind, uint64_t address, uint64_t size, uint64_t handle,
                                              const CUmemLocation* location) {
  if (c.result() != CUDA_SUCCESS) return;
  record_driver_event(c.driver_call(device_at(location), nullptr), kind, address, size, handle);
}

// A pool or VMM event, at the side of the call given; failed calls record nothing. `location`: where the memory
// lives, for calls that say (cuMemCreate, cuMemPoolCreate); else the context's device.
enum class Side { Entry, Exit };
template <typename Call>
void pool_or_vmm_event(Call c, Side side, EventKind kind, uint64_t address, uint64_t size, uint64_t handle,
                       const CUmemLocation* location = nullptr) {
  if (side == Side::Exit ? !c.at_exit() : !c.at_entry()) return;
  record_pool_or_vmm_event(c, kind, address, size, handle, location);
}

// ---- the rows ----------------------------------------------------------------------------------------------

// Allocations and frees.
template <typename Call>
GMT_HOT void on_driver_call(Call c, const cuMemAlloc_v2_params& p) {
  allocation(c, MemoryKind::Device, written(c, p.dptr), p.bytesize);
}
// Accounted at the granted size (pitch x rows), what the device holds, as the runtime hooks do; a failure at the
// size requested.
template <typename Call>
GMT_HOT void on_driver_call(Call c, const cuMemAllocPitch_v2_params& p) {
  uint64_t pitch = written(c, p.pPitch);
  uint64_t size = pitch ? pitch * p.Height : uint64_t{p.WidthInBytes} * p.Height;
  allocation(c, MemoryKind::Device, written(c, p.dptr), size);
}
template <typename Call>
GMT_HOT void on_driver_call(Call c, const cuMemAllocManaged_params& p) {
  allocation(c, MemoryKind::Managed, written(c, p.dptr), p.bytesize);
}
template <typename Call>
GMT_HOT void on_driver_call(Call c, const cuMemAllocHost_v2_params& p) {
  allocation(c, MemoryKind::HostPinned, written(c, p.pp), p.bytesize);
}
template <typename Call>
GMT_HOT void on_driver_call(Call c, const cuMemHostAlloc_params& p) {
  allocation(c, MemoryKind::HostPinned, written(c, p.pp), p.bytesize);
}
template <typename Call>
GMT_HOT void on_driver_call(Call c, const cuMemFree_v2_params& p) {
  deallocation(c, MemoryKind::Device, p.dptr);
}
template <typename Call>
GMT_HOT void on_driver_call(Call c, const cuMemFreeHost_params& p) {
  deallocation(c, MemoryKind::HostPinned, reinterpret_cast<uintptr_t>(p.p));
}

// Stream-ordered allocations and pools. The _ptsz twins have parameter structs of their own, with the same fields.
template <typename Call, typename Params>
GMT_HOT void allocation_async(Call c, const Params& p) {
  allocation(c, MemoryKind::Device, written(c, p.dptr), p.bytesize, p.hStream);
}
template <typename Call, typename Params>
GMT_HOT void allocation_from_pool(Call c, const Params& p) {
  allocation(c, MemoryKind::Device, written(c, p.dptr), p.bytesize, p.hStream, p.pool);
}
template <typename Call, typename Params>
GMT_HOT void deallocation_async(Call c, const Params& p) {
  deallocation(c, MemoryKind::Device, p.dptr, p.hStream);
}
template <typename Call>
GMT_HOT void on_driver_call(Call c, const cuMemAllocAsync_params& p) {
  allocation_async(c, p);
}
template <typename Call>
GMT_HOT void on_driver_call(Call c, const cuMemAllocAsync_ptsz_params& p) {
  allocation_async(c, p);
}
template <typename Call>
GMT_HOT void on_driver_call(Call c, const cuMemAllocFromPoolAsync_params& p) {
  allocation_from_pool(c, p);
}
template <typename Call>
GMT_HOT void on_driver_call(Call c, const cuMemAllocFromPoolAsync_ptsz_params& p) {
  allocation_from_pool(c, p);
}
template <typename Call>
GMT_HOT void on_driver_call(Call c, const cuMemFreeAsync_params& p) {
  deallocation_async(c, p);
}
template <typename Call>
GMT_HOT void on_driver_call(Call c, const cuMemFreeAsync_ptsz_params& p) {
  deallocation_async(c, p);
}

// A pool's events name the pool in `address`.
template <typename Call>
void on_driver_call(Call c, const cuMemPoolCreate_params& p) {
  pool_or_vmm_event(c, Side::Exit, EventKind::PoolCreate, written(c, p.pool), 0, 0,
                    p.poolProps ? &p.poolProps->location : nullptr);
}
template <typename Call>
void on_driver_call(Call c, const cuMemPoolDestroy_params& p) {
  pool_or_vmm_event(c, Side::Entry, EventKind::PoolDestroy, reinterpret_cast<uint64_t>(p.pool), 0, 0);
}
template <typename Call>
void on_driver_call(Call c, const cuMemPoolTrimTo_params& p) {
  pool_or_vmm_event(c, Side::Exit, EventKind::PoolTrim, reinterpret_cast<uint64_t>(p.pool), p.minBytesToKeep, 0);
}

// Virtual memory management. Physical memory is a handle, with no address, on the device its properties name.
template <typename Call>
void on_driver_call(Call c, const cuMemCreate_params& p) {
  pool_or_vmm_event(c, Side::Exit, EventKind::VmmCreate, 0, p.size, written(c, p.handle),
                    p.prop ? &p.prop->location : nullptr);
}
template <typename Call>
void on_driver_call(Call c, const cuMemRelease_params& p) {
  pool_or_vmm_event(c, Side::Entry, EventKind::VmmRelease, 0, 0, p.handle);
}
template <typename Call>
void on_driver_call(Call c, const cuMemMap_params& p) {  // p.offset (into the handle) is not recorded
  pool_or_vmm_event(c, Side::Exit, EventKind::VmmMap, p.ptr, p.size, p.handle);
}
template <typename Call>
void on_driver_call(Call c, const cuMemUnmap_params& p) {
  pool_or_vmm_event(c, Side::Entry, EventKind::VmmUnmap, p.ptr, p.size, 0);
}
template <typename Call>
void on_driver_call(Call c, const cuMemAddressReserve_params& p) {
  pool_or_vmm_event(c, Side::Exit, EventKind::VmmReserve, written(c, p.ptr), p.size, 0);
}
template <typename Call>
void on_driver_call(Call c, const cuMemAddressFree_params& p) {
  pool_or_vmm_event(c, Side::Entry, EventKind::VmmAddressFree, p.ptr, p.size, 0);
}

// Memory imported from other processes. Rare calls: the recorder asks the driver for the opened range's size and
// the device it lives on (recorder/driver_queries.h).
template <typename Call, typename Params>
GMT_DRIVER_RARE void ipc_open(Call c, const Params& p) {
  if (c.at_exit()) record_ipc_open(c.driver_call(kDeviceOfContext, nullptr), written(c, p.pdptr));
}
template <typename Call>
void on_driver_call(Call c, const cuIpcOpenMemHandle_params& p) {
  ipc_open(c, p);
}
template <typename Call>
void on_driver_call(Call c, const cuIpcOpenMemHandle_v2_params& p) {
  ipc_open(c, p);
}
template <typename Call>
GMT_DRIVER_RARE void on_driver_call(Call c, const cuIpcCloseMemHandle_params& p) {
  if (c.at_entry()) record_ipc_close(c.driver_call(kDeviceOfContext, nullptr), p.dptr);
}
template <typename Call>
GMT_DRIVER_RARE void on_driver_call(Call c, const cuMemImportFromShareableHandle_params& p) {
  if (c.at_exit() && c.result() == CUDA_SUCCESS) {
    record_vmm_import(c.driver_call(kDeviceOfContext, nullptr), written(c, p.handle));
  }
}

// Stream capture (recorder/capture_safety.h): no event; counted, so that an allocation on a capturing stream is
// known as a node of the graph being built. A capture ends with the call that ends it, whatever its result says.
template <typename Call>
void capture_begun(Call c) {
  if (c.at_exit() && c.result() == CUDA_SUCCESS) note_capture_begun();
}
template <typename Call>
void on_driver_call(Call c, const cuStreamBeginCapture_params&) {
  capture_begun(c);
}
template <typename Call>
void on_driver_call(Call c, const cuStreamBeginCapture_ptsz_params&) {
  capture_begun(c);
}
template <typename Call>
void on_driver_call(Call c, const cuStreamBeginCapture_v2_params&) {
  capture_begun(c);
}
template <typename Call>
void on_driver_call(Call c, const cuStreamBeginCapture_v2_ptsz_params&) {
  capture_begun(c);
}
template <typename Call>
void on_driver_call(Call c, const cuStreamBeginCaptureToGraph_params&) {
  capture_begun(c);
}
template <typename Call>
void on_driver_call(Call c, const cuStreamBeginCaptureToGraph_ptsz_params&) {
  capture_begun(c);
}
template <typename Call>
void on_driver_call(Call c, const cuStreamEndCapture_params&) {
  if (c.at_exit()) note_capture_end_returned(c.result());
}
template <typename Call>
void on_driver_call(Call c, const cuStreamEndCapture_ptsz_params&) {
  if (c.at_exit()) note_capture_end_returned(c.result());
}

// CUDA graphs' memory nodes (recorder/graph_memory.h): a node where it is made, its memory at each launch.
template <typename Call>
GMT_DRIVER_RARE void on_driver_call(Call c, const cuGraphAddMemAllocNode_params& p) {
  if (c.at_exit() && c.result() == CUDA_SUCCESS && p.nodeParams) {
    record_graph_alloc_node(c.driver_call(kDeviceOfContext, nullptr), p.nodeParams->dptr, p.nodeParams->bytesize);
  }
}
template <typename Call>
GMT_DRIVER_RARE void on_driver_call(Call c, const cuGraphInstantiateWithFlags_params& p) {
  if (c.at_exit() && c.result() == CUDA_SUCCESS) {
    note_graph_instantiated(written(c, p.phGraphExec), reinterpret_cast<uint64_t>(p.hGraph), p.flags);
  }
}
template <typename Call, typename Params>
GMT_DRIVER_RARE void graph_instantiated_with_params(Call c, const Params& p) {
  if (c.at_exit() && c.result() == CUDA_SUCCESS) {
    note_graph_instantiated(written(c, p.phGraphExec), reinterpret_cast<uint64_t>(p.hGraph),
                            p.instantiateParams ? p.instantiateParams->flags : 0);
  }
}
template <typename Call>
void on_driver_call(Call c, const cuGraphInstantiateWithParams_params& p) {
  graph_instantiated_with_params(c, p);
}
template <typename Call>
void on_driver_call(Call c, const cuGraphInstantiateWithParams_ptsz_params& p) {
  graph_instantiated_with_params(c, p);
}
template <typename Call>
GMT_DRIVER_RARE void graph_launched(Call c, CUgraphExec exec, CUstream stream) {
  if (c.at_exit() && c.result() == CUDA_SUCCESS) {
    record_graph_launch(c.driver_call(kDeviceOfContext, stream), reinterpret_cast<uint64_t>(exec));
  }
}
template <typename Call>
void on_driver_call(Call c, const cuGraphLaunch_params& p) {  // the plain launch's struct names the exec hGraph
  graph_launched(c, p.hGraph, p.hStream);
}
template <typename Call>
void on_driver_call(Call c, const cuGraphLaunch_ptsz_params& p) {
  graph_launched(c, p.hGraphExec, p.hStream);
}
template <typename Call>
void on_driver_call(Call c, const cuGraphExecDestroy_params& p) {
  if (c.at_entry()) forget_graph_exec(reinterpret_cast<uint64_t>(p.hGraphExec));
}

#undef GMT_DRIVER_RARE

}  // namespace gmt::recorder::driver_calls
