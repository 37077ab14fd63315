// The one list of CUPTI callback ids we enable (STYLE.md rules 2 and 8): cupti_subscriber.cpp enables and
// disables exactly these, in order and in reverse; cupti_callbacks.cpp translates each into events.
//
// Driver-API callbacks count the allocations: every path ends in the driver (static cudart, which nvcc
// links by default and LD_PRELOAD cannot see; shared cudart; the driver API; PyTorch's VMM calls through
// cudaGetDriverEntryPointByVersion). Runtime-API callbacks count nothing: they only name the runtime call
// in progress, so a cuMemAlloc_v2 made by cudaMalloc is reported as cudaMalloc (a runtime call also raises
// the driver callback, with the same correlation id: counting at both layers would count twice). They are
// switched off while our cudart hooks name the calls instead (runtime_naming.h).
#pragma once

#include <cupti.h>

#include <cstddef>

#include "schema/trace_schema.h"

namespace gmt::cupti {

struct CallbackSite {
  CUpti_CallbackDomain domain;
  CUpti_CallbackId cbid;
  const char* name;  // the CUPTI name, for messages
  schema::Api api;   // what the event is recorded as (a _ptsz twin records as the plain call)
};

#define GMT_DRIVER_SITE(fn, api) {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_##fn, #fn, schema::Api::api}
#define GMT_RUNTIME_SITE(fn, api) \
  {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_##fn, #fn, schema::Api::api}

// Both of the driver's IPC-open entry points are Api::cuIpcOpenMemHandle_v2 (the schema spells it so because
// cuda.h #defines cuIpcOpenMemHandle as cuIpcOpenMemHandle_v2); the CBID names are pasted, never expanded.
inline constexpr CallbackSite kCallbackSites[] = {
    // Allocations and frees.
    GMT_DRIVER_SITE(cuMemAlloc_v2, cuMemAlloc),
    GMT_DRIVER_SITE(cuMemAllocPitch_v2, cuMemAllocPitch),
    GMT_DRIVER_SITE(cuMemAllocManaged, cuMemAllocManaged),
    GMT_DRIVER_SITE(cuMemAllocHost_v2, cuMemAllocHost),
    GMT_DRIVER_SITE(cuMemHostAlloc, cuMemHostAlloc),
    // The driver has no cuMemHostAlloc_v2 symbol, but CUPTI has an id for it (FACTS.md lists 271): enabled
    // too, with the same parameters, so pinned allocations are counted whichever id the driver raises.
    GMT_DRIVER_SITE(cuMemHostAlloc_v2, cuMemHostAlloc),
    GMT_DRIVER_SITE(cuMemFree_v2, cuMemFree),
    GMT_DRIVER_SITE(cuMemFreeHost, cuMemFreeHost),
    // Stream-ordered allocations and pools.
    GMT_DRIVER_SITE(cuMemAllocAsync, cuMemAllocAsync),
    GMT_DRIVER_SITE(cuMemAllocAsync_ptsz, cuMemAllocAsync),
    GMT_DRIVER_SITE(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync),
    GMT_DRIVER_SITE(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync),
    GMT_DRIVER_SITE(cuMemFreeAsync, cuMemFreeAsync),
    GMT_DRIVER_SITE(cuMemFreeAsync_ptsz, cuMemFreeAsync),
    GMT_DRIVER_SITE(cuMemPoolCreate, cuMemPoolCreate),
    GMT_DRIVER_SITE(cuMemPoolDestroy, cuMemPoolDestroy),
    GMT_DRIVER_SITE(cuMemPoolTrimTo, cuMemPoolTrimTo),
    // Virtual memory management (PyTorch's expandable segments).
    GMT_DRIVER_SITE(cuMemCreate, cuMemCreate),
    GMT_DRIVER_SITE(cuMemRelease, cuMemRelease),
    GMT_DRIVER_SITE(cuMemMap, cuMemMap),
    GMT_DRIVER_SITE(cuMemUnmap, cuMemUnmap),
    GMT_DRIVER_SITE(cuMemAddressReserve, cuMemAddressReserve),
    GMT_DRIVER_SITE(cuMemAddressFree, cuMemAddressFree),
    // Memory imported from other processes (IPC handles, shareable VMM handles).
    GMT_DRIVER_SITE(cuIpcOpenMemHandle, cuIpcOpenMemHandle_v2),
    GMT_DRIVER_SITE(cuIpcOpenMemHandle_v2, cuIpcOpenMemHandle_v2),
    GMT_DRIVER_SITE(cuIpcCloseMemHandle, cuIpcCloseMemHandle),
    GMT_DRIVER_SITE(cuMemImportFromShareableHandle, cuMemImportFromShareableHandle),
    // Stream capture: counted so that an allocation on a capturing stream is known as a graph node
    // (recorder/capture_safety.h); no event of their own.
    GMT_DRIVER_SITE(cuStreamBeginCapture, Unknown),
    GMT_DRIVER_SITE(cuStreamBeginCapture_ptsz, Unknown),
    GMT_DRIVER_SITE(cuStreamBeginCapture_v2, Unknown),
    GMT_DRIVER_SITE(cuStreamBeginCapture_v2_ptsz, Unknown),
    GMT_DRIVER_SITE(cuStreamBeginCaptureToGraph, Unknown),
    GMT_DRIVER_SITE(cuStreamBeginCaptureToGraph_ptsz, Unknown),
    GMT_DRIVER_SITE(cuStreamEndCapture, Unknown),
    GMT_DRIVER_SITE(cuStreamEndCapture_ptsz, Unknown),
    // CUDA graphs' memory nodes (recorder/graph_memory.h): allocated and freed at each launch.
    GMT_DRIVER_SITE(cuGraphAddMemAllocNode, cudaMallocAsync),
    GMT_DRIVER_SITE(cuGraphInstantiateWithFlags, Unknown),
    GMT_DRIVER_SITE(cuGraphInstantiateWithParams, Unknown),
    GMT_DRIVER_SITE(cuGraphInstantiateWithParams_ptsz, Unknown),
    GMT_DRIVER_SITE(cuGraphLaunch, graphMemAlloc),
    GMT_DRIVER_SITE(cuGraphLaunch_ptsz, graphMemAlloc),
    GMT_DRIVER_SITE(cuGraphExecDestroy, Unknown),

    // Runtime calls: naming only.
    GMT_RUNTIME_SITE(cudaMalloc_v3020, cudaMalloc),
    GMT_RUNTIME_SITE(cudaMallocPitch_v3020, cudaMallocPitch),
    GMT_RUNTIME_SITE(cudaFree_v3020, cudaFree),
    GMT_RUNTIME_SITE(cudaMallocHost_v3020, cudaMallocHost),
    GMT_RUNTIME_SITE(cudaFreeHost_v3020, cudaFreeHost),
    GMT_RUNTIME_SITE(cudaHostAlloc_v3020, cudaHostAlloc),
    GMT_RUNTIME_SITE(cudaMalloc3D_v3020, cudaMalloc3D),
    GMT_RUNTIME_SITE(cudaMallocManaged_v6000, cudaMallocManaged),
    GMT_RUNTIME_SITE(cudaMallocAsync_v11020, cudaMallocAsync),
    GMT_RUNTIME_SITE(cudaMallocAsync_ptsz_v11020, cudaMallocAsync),
    GMT_RUNTIME_SITE(cudaFreeAsync_v11020, cudaFreeAsync),
    GMT_RUNTIME_SITE(cudaFreeAsync_ptsz_v11020, cudaFreeAsync),
    GMT_RUNTIME_SITE(cudaMallocFromPoolAsync_v11020, cudaMallocFromPoolAsync),
    GMT_RUNTIME_SITE(cudaMallocFromPoolAsync_ptsz_v11020, cudaMallocFromPoolAsync),
    GMT_RUNTIME_SITE(cudaMemPoolCreate_v11020, cudaMemPoolCreate),
    GMT_RUNTIME_SITE(cudaMemPoolDestroy_v11020, cudaMemPoolDestroy),
    GMT_RUNTIME_SITE(cudaMemPoolTrimTo_v11020, cudaMemPoolTrimTo),
    GMT_RUNTIME_SITE(cudaIpcOpenMemHandle_v4010, cudaIpcOpenMemHandle),
    GMT_RUNTIME_SITE(cudaIpcCloseMemHandle_v4010, cudaIpcCloseMemHandle),
};

// The schema's name of a call site (Api::Unknown for an id that is not one of ours).
inline schema::Api api_of(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  for (const CallbackSite& site : kCallbackSites) {
    if (site.cbid == cbid && site.domain == domain) return site.api;
  }
  return schema::Api::Unknown;
}

#undef GMT_DRIVER_SITE
#undef GMT_RUNTIME_SITE

// The subscriber's callback (cuptiSubscribe). Runs on any app thread, concurrently; never throws, never
// records until the recorder's backend is Cupti (set right after start() returned true).
void CUPTIAPI on_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* cbdata);

}  // namespace gmt::cupti
