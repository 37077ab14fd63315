// The one list of CUPTI callback ids we enable (docs/design.md, "Backends": cupti): cupti_subscriber.cpp enables and
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

#include "recorder/driver_catalog.h"
#include "schema/trace_schema.h"

namespace gmt::cupti {

struct CallbackSite {
  CUpti_CallbackDomain domain;
  CUpti_CallbackId cbid;
  const char* name;  // the CUPTI name, for messages
  schema::Api api;   // what the event is recorded as (a _ptsz twin records as the plain call)
};

// The driver sites are the driver catalog's functions (recorder/driver_catalog.h), in its order.
#define GMT_DRIVER_SITE(fn, api) {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_##fn, #fn, schema::Api::api},
#define GMT_DRIVER_SITE_CUPTI_ONLY(fn, api, parameters) \
  {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_##fn, #fn, schema::Api::api},
#define GMT_RUNTIME_SITE(fn, api) \
  { CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_##fn, #fn, schema::Api::api }

inline constexpr CallbackSite kCallbackSites[] = {
    GMT_DRIVER_CATALOG(GMT_DRIVER_SITE, GMT_DRIVER_SITE_CUPTI_ONLY)

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
#undef GMT_DRIVER_SITE_CUPTI_ONLY
#undef GMT_RUNTIME_SITE

// The subscriber's callback (cuptiSubscribe). Runs on any app thread, concurrently; never throws, never
// records until the recorder's backend is Cupti (set right after start() returned true).
void CUPTIAPI on_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* cbdata);

}  // namespace gmt::cupti
