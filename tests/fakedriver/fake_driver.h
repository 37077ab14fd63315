// A TEST FIXTURE: the seam between the fake CUDA driver (fake_cuda.cpp, built as libcuda.so.1) and the fake
// CUPTI (fake_cupti.cpp, built as libcupti.so.13). The real driver raises CUPTI's callbacks from inside its
// API functions; the fake driver does the same through the function the fake CUPTI hands it when a tool
// subscribes.
#pragma once

#include <cupti.h>

extern "C" {

// Called by the fake driver at the entry and the exit of each API function it implements: the fake CUPTI calls
// the subscriber's callback when that id is enabled. `result` is null at entry.
using GmtFakeCuptiRaise = void (*)(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, CUpti_ApiCallbackSite site,
                                   const char* name, const void* params, CUresult* result, CUcontext context);

// Exported by the fake driver: the fake CUPTI attaches its raise function when a tool subscribes.
void gmt_fake_cuda_attach_cupti(GmtFakeCuptiRaise raise);

// Exported by the fake driver: the device of a fake context (what cuptiGetDeviceId answers), -1 for none.
int gmt_fake_cuda_device_of_context(CUcontext context);
}
