// The CUPTI callback: turns one driver-API call into the events of recorder/driver_events.h (the same
// events the driver entry-point hooks record for the same call), named after the runtime call in progress
// (runtime_naming.h) so those events carry the name the app used.
//
// Parameters are read from CUPTI's generated `*_params` structs (generated_cuda_meta.h); the field names
// below are checked by the compiler against that header. Order (STYLE.md rule 5): allocations and creations
// at API exit, once the result is known; frees, releases, unmaps and destroys at API entry, before the real
// call runs, since another thread can be handed the same address the moment it returns.
#include "cupti/cupti_callbacks.h"

#include <cuda.h>

#include <cstdint>
#include <optional>
#include <type_traits>

#include "cupti/cupti_loader.h"
#include "cupti/runtime_naming.h"
#include "recorder/backend.h"
#include "recorder/cache_hints.h"
#include "recorder/capture_safety.h"
#include "recorder/driver_events.h"
#include "recorder/graph_memory.h"
#include "recorder/guard.h"

namespace gmt::cupti {
namespace {

using recorder::DeviceMemoryInfo;
using recorder::DriverCall;
using schema::Api;
using schema::EventKind;
using schema::MemoryKind;

// One driver callback being translated.
struct Call {
  const CUpti_CallbackData& data;
  const CuptiTable* table;
  Api driver_api;
  int32_t result;  // the CUresult at exit; 0 at entry (the call has not run yet)
};

// The last context this thread asked about. cuptiGetDeviceId cost ~0.2 us per call on the H200 (about a
// quarter of a cudaMallocAsync+cudaFreeAsync pair), and a thread nearly always stays on one context. Keyed
// by CUPTI's context UID, which is never reused within a process (a CUcontext pointer can be, after
// cuCtxDestroy), so a cached answer cannot belong to another context.
struct DeviceCache {
  uint32_t context_uid = 0;  // 0: empty
  int16_t device = -1;
};
thread_local DeviceCache t_device_cache __attribute__((tls_model("initial-exec")));

GMT_HOT int16_t device_of_context(const Call& c) {
  if (!c.data.context) return -1;  // no context current: nothing to ask
  const uint32_t uid = c.data.contextUid;
  if (uid != 0 && t_device_cache.context_uid == uid) return t_device_cache.device;
  uint32_t id = 0;
  if (GMT_CUPTI_CALL(c.table, nullptr, cuptiGetDeviceId, c.data.context, &id) != CUPTI_SUCCESS) return -1;
  const auto device = static_cast<int16_t>(id);
  if (uid != 0) t_device_cache = {uid, device};
  return device;
}

// Where cuMemCreate / cuMemPoolCreate put the memory, when that is a device; else the context's device.
int16_t device_of_location(const Call& c, const CUmemLocation* location) {
  if (!location) return device_of_context(c);
  return location->type == CU_MEM_LOCATION_TYPE_DEVICE ? static_cast<int16_t>(location->id) : int16_t{-1};
}

GMT_HOT DriverCall driver_call(const Call& c, int16_t device, CUstream stream = nullptr) {
  DriverCall call;
  // make_event prefers recorder::current_runtime_api() (set by the cudart hooks); ours is the fallback for
  // runtimes the hooks cannot see (runtime_naming.h).
  const Api runtime_api = runtime_call_in_progress();
  call.driver_api = runtime_api != Api::Unknown ? runtime_api : c.driver_api;
  call.source = schema::Source::Cupti;
  call.result = c.result;
  call.device = device;
  call.context = reinterpret_cast<uint64_t>(c.data.context);
  call.stream = reinterpret_cast<uint64_t>(stream);
  return call;
}

// What an out-parameter holds after a successful call; 0 after a failed one (never read then: the driver
// may have left it unwritten).
template <typename T>
uint64_t out_value(const Call& c, T* out) {
  if (c.result != CUDA_SUCCESS || !out) return 0;
  if constexpr (std::is_pointer_v<T>) {
    return reinterpret_cast<uintptr_t>(*out);
  } else {
    return static_cast<uint64_t>(*out);
  }
}

// The device's free and total memory right after an out-of-memory failure. cuMemGetInfo_v2 raises no
// callback of ours (it is not enabled, and the HookScope held here makes any nested callback a no-op). Only
// after CUDA_ERROR_OUT_OF_MEMORY: after other errors the context may be unusable.
GMT_HOT std::optional<DeviceMemoryInfo> memory_after_failure(const Call& c, MemoryKind kind) {
  if (c.result != CUDA_ERROR_OUT_OF_MEMORY || kind == MemoryKind::HostPinned) return std::nullopt;
  if (!c.table->cuMemGetInfo_v2 || !c.data.context) return std::nullopt;
  size_t free_bytes = 0, total_bytes = 0;
  recorder::RelaxedCaptureScope relaxed;  // not stream-ordered (capture_safety.h)
  if (c.table->cuMemGetInfo_v2(&free_bytes, &total_bytes) != CUDA_SUCCESS) return std::nullopt;
  return DeviceMemoryInfo{free_bytes, total_bytes};
}

// At exit: Alloc (result 0) or AllocFailed (size = the request).
GMT_HOT void alloc(const Call& c, MemoryKind kind, uint64_t address, uint64_t size, CUstream stream = nullptr,
                   uint64_t pool = 0) {
  if (c.data.callbackSite != CUPTI_API_EXIT) return;
  note_allocation(recorder::current_runtime_api() != Api::Unknown);
  int16_t device = kind == MemoryKind::HostPinned ? int16_t{-1} : device_of_context(c);
  recorder::record_driver_alloc(driver_call(c, device, stream), kind, address, size, pool,
                                memory_after_failure(c, kind));
}

// At entry, before the real free runs.
GMT_HOT void free_at_entry(const Call& c, MemoryKind kind, uint64_t address, CUstream stream = nullptr) {
  if (c.data.callbackSite != CUPTI_API_ENTER || address == 0) return;
  int16_t device = kind == MemoryKind::HostPinned ? int16_t{-1} : device_of_context(c);
  recorder::record_driver_free(driver_call(c, device, stream), kind, address);
}

// A pool or VMM event; `at_exit` says which side of the call it belongs to. Failed calls record nothing.
void event(const Call& c, bool at_exit, EventKind kind, uint64_t address, uint64_t size, uint64_t handle,
           const CUmemLocation* location = nullptr) {
  if ((c.data.callbackSite == CUPTI_API_EXIT) != at_exit || c.result != CUDA_SUCCESS) return;
  recorder::record_driver_event(driver_call(c, device_of_location(c, location)), kind, address, size, handle);
}

constexpr bool kAtEntry = false;
constexpr bool kAtExit = true;

template <typename Params>
const Params& params(const Call& c) {
  return *static_cast<const Params*>(c.data.functionParams);
}

GMT_HOT void on_driver(CUpti_CallbackId cbid, const CUpti_CallbackData& data, const CuptiTable* table) {
  if (!data.functionParams) return;
  int32_t result = 0;
  if (data.callbackSite == CUPTI_API_EXIT) {
    if (!data.functionReturnValue) return;  // documented valid at exit; do not invent a result
    result = static_cast<int32_t>(*static_cast<const CUresult*>(data.functionReturnValue));
  }
  const Call c{data, table, api_of(CUPTI_CB_DOMAIN_DRIVER_API, cbid), result};

  switch (cbid) {
    // ---- allocations and frees ------------------------------------------------------------------------
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
      const auto& p = params<cuMemAlloc_v2_params>(c);
      return alloc(c, MemoryKind::Device, out_value(c, p.dptr), p.bytesize);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
      // Accounted at the granted size (pitch x rows), what the device holds, as the runtime hooks do.
      const auto& p = params<cuMemAllocPitch_v2_params>(c);
      uint64_t pitch = out_value(c, p.pPitch);
      uint64_t size = c.result == CUDA_SUCCESS && pitch ? pitch * p.Height : uint64_t{p.WidthInBytes} * p.Height;
      return alloc(c, MemoryKind::Device, out_value(c, p.dptr), size);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
      const auto& p = params<cuMemAllocManaged_params>(c);
      return alloc(c, MemoryKind::Managed, out_value(c, p.dptr), p.bytesize);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2: {
      const auto& p = params<cuMemAllocHost_v2_params>(c);
      return alloc(c, MemoryKind::HostPinned, out_value(c, p.pp), p.bytesize);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc:
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc_v2: {  // same parameters (void** pp, size_t bytesize, Flags)
      const auto& p = params<cuMemHostAlloc_params>(c);
      return alloc(c, MemoryKind::HostPinned, out_value(c, p.pp), p.bytesize);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
      return free_at_entry(c, MemoryKind::Device, params<cuMemFree_v2_params>(c).dptr);
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost:
      return free_at_entry(c, MemoryKind::HostPinned, reinterpret_cast<uintptr_t>(params<cuMemFreeHost_params>(c).p));

    // ---- stream-ordered allocations and pools ---------------------------------------------------------
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync: {
      const auto& p = params<cuMemAllocAsync_params>(c);
      return alloc(c, MemoryKind::Device, out_value(c, p.dptr), p.bytesize, p.hStream);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
      const auto& p = params<cuMemAllocAsync_ptsz_params>(c);
      return alloc(c, MemoryKind::Device, out_value(c, p.dptr), p.bytesize, p.hStream);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync: {
      const auto& p = params<cuMemAllocFromPoolAsync_params>(c);
      return alloc(c, MemoryKind::Device, out_value(c, p.dptr), p.bytesize, p.hStream,
                   reinterpret_cast<uint64_t>(p.pool));
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
      const auto& p = params<cuMemAllocFromPoolAsync_ptsz_params>(c);
      return alloc(c, MemoryKind::Device, out_value(c, p.dptr), p.bytesize, p.hStream,
                   reinterpret_cast<uint64_t>(p.pool));
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync: {
      const auto& p = params<cuMemFreeAsync_params>(c);
      return free_at_entry(c, MemoryKind::Device, p.dptr, p.hStream);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz: {
      const auto& p = params<cuMemFreeAsync_ptsz_params>(c);
      return free_at_entry(c, MemoryKind::Device, p.dptr, p.hStream);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolCreate: {
      const auto& p = params<cuMemPoolCreate_params>(c);
      const CUmemLocation* location = p.poolProps ? &p.poolProps->location : nullptr;
      return event(c, kAtExit, EventKind::PoolCreate, out_value(c, p.pool), 0, 0, location);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolDestroy:
      return event(c, kAtEntry, EventKind::PoolDestroy,
                   reinterpret_cast<uint64_t>(params<cuMemPoolDestroy_params>(c).pool), 0, 0);
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo: {
      const auto& p = params<cuMemPoolTrimTo_params>(c);
      return event(c, kAtExit, EventKind::PoolTrim, reinterpret_cast<uint64_t>(p.pool), p.minBytesToKeep, 0);
    }

    // ---- virtual memory management --------------------------------------------------------------------
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve: {
      const auto& p = params<cuMemAddressReserve_params>(c);
      return event(c, kAtExit, EventKind::VmmReserve, out_value(c, p.ptr), p.size, 0);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree: {
      const auto& p = params<cuMemAddressFree_params>(c);
      return event(c, kAtEntry, EventKind::VmmAddressFree, p.ptr, p.size, 0);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
      // Physical memory: a handle, no address. The device is where the memory lives (prop->location).
      const auto& p = params<cuMemCreate_params>(c);
      const CUmemLocation* location = p.prop ? &p.prop->location : nullptr;
      return event(c, kAtExit, EventKind::VmmCreate, 0, p.size, out_value(c, p.handle), location);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease:
      return event(c, kAtEntry, EventKind::VmmRelease, 0, 0, params<cuMemRelease_params>(c).handle);
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
      const auto& p = params<cuMemMap_params>(c);  // p.offset (into the handle) is not recorded
      return event(c, kAtExit, EventKind::VmmMap, p.ptr, p.size, p.handle);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: {
      const auto& p = params<cuMemUnmap_params>(c);
      return event(c, kAtEntry, EventKind::VmmUnmap, p.ptr, p.size, 0);
    }

    // ---- memory imported from other processes ---------------------------------------------------------
    // The recorder asks the driver for the opened range's size and the device it lives on (rare calls).
    case CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle: {
      if (c.data.callbackSite != CUPTI_API_EXIT) return;
      const auto& p = params<cuIpcOpenMemHandle_params>(c);
      return recorder::record_ipc_open(driver_call(c, device_of_context(c)), out_value(c, p.pdptr));
    }
    case CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle_v2: {
      if (c.data.callbackSite != CUPTI_API_EXIT) return;
      const auto& p = params<cuIpcOpenMemHandle_v2_params>(c);
      return recorder::record_ipc_open(driver_call(c, device_of_context(c)), out_value(c, p.pdptr));
    }
    case CUPTI_DRIVER_TRACE_CBID_cuIpcCloseMemHandle:
      if (c.data.callbackSite != CUPTI_API_ENTER) return;
      return recorder::record_ipc_close(driver_call(c, device_of_context(c)), params<cuIpcCloseMemHandle_params>(c).dptr);
    case CUPTI_DRIVER_TRACE_CBID_cuMemImportFromShareableHandle: {
      if (c.data.callbackSite != CUPTI_API_EXIT || c.result != CUDA_SUCCESS) return;
      const auto& p = params<cuMemImportFromShareableHandle_params>(c);
      return recorder::record_vmm_import(driver_call(c, device_of_context(c)), out_value(c, p.handle));
    }

    // ---- stream capture (recorder/capture_safety.h) -------------------------------------------------
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph_ptsz:
      if (c.data.callbackSite == CUPTI_API_EXIT && c.result == CUDA_SUCCESS) recorder::note_capture_begun();
      return;
    case CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz:
      if (c.data.callbackSite == CUPTI_API_EXIT) recorder::note_capture_end_returned(c.result);
      return;

    // ---- CUDA graphs' memory nodes (recorder/graph_memory.h) ------------------------------------------
    case CUPTI_DRIVER_TRACE_CBID_cuGraphAddMemAllocNode: {
      const auto& p = params<cuGraphAddMemAllocNode_params>(c);
      if (c.data.callbackSite != CUPTI_API_EXIT || c.result != CUDA_SUCCESS || !p.nodeParams) return;
      return recorder::record_graph_alloc_node(driver_call(c, device_of_context(c)), p.nodeParams->dptr,
                                               p.nodeParams->bytesize);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags: {
      const auto& p = params<cuGraphInstantiateWithFlags_params>(c);
      if (c.data.callbackSite != CUPTI_API_EXIT || c.result != CUDA_SUCCESS) return;
      return recorder::note_graph_instantiated(out_value(c, p.phGraphExec), reinterpret_cast<uint64_t>(p.hGraph),
                                               p.flags);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams_ptsz: {  // the same parameters
      const auto& p = params<cuGraphInstantiateWithParams_params>(c);
      if (c.data.callbackSite != CUPTI_API_EXIT || c.result != CUDA_SUCCESS) return;
      return recorder::note_graph_instantiated(out_value(c, p.phGraphExec), reinterpret_cast<uint64_t>(p.hGraph),
                                               p.instantiateParams ? p.instantiateParams->flags : 0);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz: {  // the same parameters
      const auto& p = params<cuGraphLaunch_params>(c);
      if (c.data.callbackSite != CUPTI_API_EXIT || c.result != CUDA_SUCCESS) return;
      return recorder::record_graph_launch(driver_call(c, device_of_context(c), p.hStream),
                                           reinterpret_cast<uint64_t>(p.hGraph));
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecDestroy:
      if (c.data.callbackSite != CUPTI_API_ENTER) return;
      return recorder::forget_graph_exec(reinterpret_cast<uint64_t>(params<cuGraphExecDestroy_params>(c).hGraphExec));
    default:
      return;  // an id we did not enable
  }
}

}  // namespace

GMT_HOT void CUPTIAPI on_callback(void* /*userdata*/, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                          const void* cbdata) {
  // First, always: our own CUDA calls (cuMemGetInfo below, the recorder's), and callbacks nested in them or
  // in our hooks, record nothing.
  recorder::HookScope scope;
  const auto* data = static_cast<const CUpti_CallbackData*>(cbdata);
  if (!data) return;
  // We are called from C code inside CUPTI: nothing may escape (the recorder may allocate).
  try {
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
      on_runtime(cbid, *data, scope.active());
      return;
    }
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
    // Under run --verify a call that reached a recording driver wrapper raises this callback inside the wrapper's
    // guard: it is the app's call, recorded here as well (recorder/guard.h). Nested in any other hook: ours.
    if (!scope.active() && !scope.inside_recording_driver_wrapper()) return;
    // Until start() has returned and the decision is set, another path may still be the only one that records.
    if (!recorder::records_through(recorder::Backend::Cupti)) return;
    const CuptiTable* table = cupti_table();
    if (!table) return;
    on_driver(cbid, *data, table);
  } catch (...) {
    // An event lost is better than an application aborted.
  }
}

}  // namespace gmt::cupti
