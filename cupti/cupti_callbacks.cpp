// The CUPTI callback: hands one driver-API call to its row of the driver catalog (recorder/driver_calls.h), the
// same rows the driver entry-point hooks use, so both record the same events for the same call; named after the
// runtime call in progress (runtime_naming.h) so those events carry the name the app used.
//
// CUPTI calls us at each catalogued call's entry and at its exit, with its parameters in CUPTI's generated
// `*_params` struct (generated_cuda_meta.h); the row records what belongs to that side of the call.
#include "cupti/cupti_callbacks.h"

#include <cuda.h>

#include <cstdint>
#include <optional>

#include "cupti/cupti_loader.h"
#include "cupti/runtime_naming.h"
#include "recorder/backend.h"
#include "recorder/cache_hints.h"
#include "recorder/capture_safety.h"
#include "recorder/driver_calls.h"
#include "recorder/guard.h"

namespace gmt::cupti {
namespace {

using recorder::DeviceMemoryInfo;
using recorder::DriverCall;
using schema::Api;
using schema::MemoryKind;

// The last context this thread asked about. cuptiGetDeviceId cost ~0.2 us per call on the H200 (about a
// quarter of a cudaMallocAsync+cudaFreeAsync pair), and a thread nearly always stays on one context. Keyed
// by CUPTI's context UID, which is never reused within a process (a CUcontext pointer can be, after
// cuCtxDestroy), so a cached answer cannot belong to another context.
struct DeviceCache {
  uint32_t context_uid = 0;  // 0: empty
  int16_t device = -1;
};
thread_local DeviceCache t_device_cache __attribute__((tls_model("initial-exec")));

// The device of the current context of a callback (-1: none).
GMT_HOT int16_t device_of_context(const CUpti_CallbackData& data) {
  if (!data.context) return -1;  // no context current: nothing to ask
  const uint32_t uid = data.contextUid;
  if (uid != 0 && t_device_cache.context_uid == uid) return t_device_cache.device;
  uint32_t id = 0;
  if (GMT_CUPTI_CALL(cupti_table(), nullptr, cuptiGetDeviceId, data.context, &id) != CUPTI_SUCCESS) return -1;
  const auto device = static_cast<int16_t>(id);
  if (uid != 0) t_device_cache = {uid, device};
  return device;
}

// One driver callback, as the catalog's rows see a call (recorder/driver_calls.h): small enough to travel in two
// registers (the CUPTI table is read where it is needed, off the common path).
class CuptiCall {
 public:
  CuptiCall(const CUpti_CallbackData& data, Api driver_api, int32_t result)
      : data_(&data), driver_api_(driver_api), result_(result) {}

  bool at_entry() const { return data_->callbackSite == CUPTI_API_ENTER; }
  bool at_exit() const { return data_->callbackSite == CUPTI_API_EXIT; }
  int32_t result() const { return result_; }  // the CUresult at exit; 0 at entry (the call has not run yet)

  // The device's free and total memory right after an out-of-memory failure. cuMemGetInfo_v2 raises no
  // callback of ours (it is not enabled, and the HookScope held here makes any nested callback a no-op). Only
  // after CUDA_ERROR_OUT_OF_MEMORY: after other errors the context may be unusable.
  GMT_HOT std::optional<DeviceMemoryInfo> memory_after_failure(MemoryKind kind) const {
    if (result_ != CUDA_ERROR_OUT_OF_MEMORY || kind == MemoryKind::HostPinned) return std::nullopt;
    const CuptiTable* table = cupti_table();
    if (!table || !table->cuMemGetInfo_v2 || !data_->context) return std::nullopt;
    size_t free_bytes = 0, total_bytes = 0;
    recorder::RelaxedCaptureScope relaxed;  // not stream-ordered (recorder/capture_safety.h)
    if (table->cuMemGetInfo_v2(&free_bytes, &total_bytes) != CUDA_SUCCESS) return std::nullopt;
    return DeviceMemoryInfo{free_bytes, total_bytes};
  }

  GMT_HOT DriverCall driver_call(int16_t device, CUstream stream) const {
    DriverCall call;
    // make_event prefers recorder::current_runtime_api() (set by the cudart hooks); ours is the fallback for
    // runtimes the hooks cannot see (runtime_naming.h).
    const Api runtime_api = runtime_call_in_progress();
    call.driver_api = runtime_api != Api::Unknown ? runtime_api : driver_api_;
    call.source = schema::Source::Cupti;
    call.result = result_;
    call.device = device != recorder::driver_calls::kDeviceOfContext ? device : device_of_context(*data_);
    call.context = reinterpret_cast<uint64_t>(data_->context);
    call.stream = reinterpret_cast<uint64_t>(stream);
    return call;
  }

  void note_allocation() const { cupti::note_allocation(recorder::current_runtime_api() != Api::Unknown); }

 private:
  const CUpti_CallbackData* data_;
  Api driver_api_;
  int32_t result_;
};

template <typename Params>
const Params& params(const CUpti_CallbackData& data) {
  return *static_cast<const Params*>(data.functionParams);
}

GMT_HOT void on_driver(CUpti_CallbackId cbid, const CUpti_CallbackData& data) {
  if (!data.functionParams) return;
  int32_t result = 0;
  if (data.callbackSite == CUPTI_API_EXIT) {
    if (!data.functionReturnValue) return;  // documented valid at exit; do not invent a result
    result = static_cast<int32_t>(*static_cast<const CUresult*>(data.functionReturnValue));
  }
  // One case per function of the driver catalog, each handing the call to its row.
  switch (cbid) {
#define GMT_DRIVER_CASE(function, api)                                                    \
  case CUPTI_DRIVER_TRACE_CBID_##function: {                                              \
    CuptiCall call(data, Api::api, result);                                               \
    return recorder::driver_calls::on_driver_call(call, params<function##_params>(data)); \
  }
#define GMT_DRIVER_CASE_CUPTI_ONLY(function, api, parameters)                      \
  case CUPTI_DRIVER_TRACE_CBID_##function: {                                       \
    CuptiCall call(data, Api::api, result);                                        \
    return recorder::driver_calls::on_driver_call(call, params<parameters>(data)); \
  }
    GMT_DRIVER_CATALOG(GMT_DRIVER_CASE, GMT_DRIVER_CASE_CUPTI_ONLY)
#undef GMT_DRIVER_CASE
#undef GMT_DRIVER_CASE_CUPTI_ONLY
    default: return;  // an id we did not enable
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
    if (!cupti_table()) return;  // published by start() with everything the callbacks use
    on_driver(cbid, *data);
  } catch (...) {
    // An event lost is better than an application aborted.
  }
}

}  // namespace gmt::cupti
