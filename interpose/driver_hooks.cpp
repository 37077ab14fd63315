// The "hooks" backend (recorder/backend.h): wrapped CUDA driver entry points, the default where they bind
// (interpose/backend_choice.h). driver_hook_table.h lists them and says how the app reaches them. Each wrapper is
// thin: decide the backend, find the real function, pass straight through unless the driver hooks record (they
// count, or cross-check CUPTI under run --verify), and otherwise hand the call to its row of the driver catalog
// (recorder/driver_calls.h), the same rows the CUPTI backend uses: the row records its events before the real call
// (frees and other releases: the address or handle can be reused by another thread the moment the call returns) or
// after it (allocations, failures as failures).
#include <atomic>
#include <optional>

#include "interpose/backend_start.h"
#include "interpose/context_device.h"
#include "interpose/driver_api.h"
#include "interpose/driver_hook_table.h"
#include "recorder/backend.h"
#include "recorder/cache_hints.h"
#include "recorder/capture_safety.h"
#include "recorder/driver_calls.h"
#include "recorder/guard.h"

namespace {

using gmt::interpose::ContextDestruction;
using gmt::interpose::current_context;
using gmt::interpose::device_of_current_context;
using gmt::recorder::DeviceMemoryInfo;
using gmt::recorder::DriverCall;
using gmt::recorder::HookScope;
using gmt::schema::Api;
using gmt::schema::MemoryKind;

// What a wrapper returns when there is no driver behind it: reachable only through our exported symbols
// (dlsym(RTLD_DEFAULT, ...) finds them first) in a process where libcuda.so.1 cannot be loaded.
constexpr CUresult kNoDriver = CUDA_ERROR_NOT_INITIALIZED;

GMT_HOT bool hooks_record() { return gmt::recorder::records_through(gmt::recorder::Backend::DriverHooks); }

// OOM forensics: what the device said was free right after an out-of-memory error. Only then: after other
// errors the context may be unusable.
GMT_HOT std::optional<DeviceMemoryInfo> memory_after_oom(int32_t result, MemoryKind kind) {
  if (result != CUDA_ERROR_OUT_OF_MEMORY || kind == MemoryKind::HostPinned) return std::nullopt;
  size_t free_bytes = 0, total_bytes = 0;
  gmt::recorder::RelaxedCaptureScope relaxed;  // not stream-ordered (recorder/capture_safety.h)
  auto get_info = GMT_DRIVER_REAL(cuMemGetInfo_v2);
  if (!get_info || get_info(&free_bytes, &total_bytes) != CUDA_SUCCESS) return std::nullopt;
  return DeviceMemoryInfo{free_bytes, total_bytes};
}

// One side of a wrapped call, as the catalog's rows see a call (recorder/driver_calls.h): the side is known at
// compile time, so the side of a row that records nothing compiles to nothing; an api and a result, so that it
// travels in one register.
template <bool kAtExit>
class HookCall {
 public:
  HookCall(Api api, CUresult result) : api_(api), result_(static_cast<int32_t>(result)) {}

  static constexpr bool at_entry() { return !kAtExit; }
  static constexpr bool at_exit() { return kAtExit; }
  int32_t result() const { return result_; }
  GMT_HOT std::optional<DeviceMemoryInfo> memory_after_failure(MemoryKind kind) const {
    return memory_after_oom(result_, kind);
  }
  GMT_HOT DriverCall driver_call(int16_t device, CUstream stream) const {
    DriverCall call;
    call.driver_api = api_;
    call.source = gmt::schema::Source::DriverHook;
    call.result = result_;
    call.context = current_context();
    call.device =
        device != gmt::recorder::driver_calls::kDeviceOfContext ? device : device_of_current_context(call.context);
    call.stream = reinterpret_cast<uint64_t>(stream);
    return call;
  }
  static void note_allocation() {}

 private:
  Api api_;
  int32_t result_;
};

// A catalogued call: its row before the real call runs, the call, its row after it (one of the two records).
template <typename Params, typename Real>
GMT_HOT CUresult recorded_call(const Params& params, Real real_call) {
  constexpr Api api = gmt::recorder::driver_calls::Function<Params>::kApi;
  HookCall<false> before(api, CUDA_SUCCESS);
  gmt::recorder::driver_calls::on_driver_call(before, params);
  CUresult result = real_call();
  HookCall<true> after(api, result);
  gmt::recorder::driver_calls::on_driver_call(after, params);
  return result;
}

// The driver's answer to cuGetProcAddress, with our wrapper in place of a function we wrap. Matched by
// address against libcuda's exported functions, so whatever version the driver picked for (symbol,
// cudaVersion, flags), the wrapper handed out is the one of exactly that function; no match, no change.
void* substitute(const char* symbol, void* found, int cuda_version, cuuint64_t flags) {
  int index = gmt::interpose::driver_hook_for_real(found);
  if (gmt::interpose::driver_debug_enabled() &&
      (index >= 0 || (symbol && symbol[0] == 'c' && symbol[1] == 'u' && symbol[2] == 'M' && symbol[3] == 'e'))) {
    gmt::interpose::driver_debug("cuGetProcAddress(\"%s\", %d, %llu) = %p: %s%s", symbol, cuda_version,
                                 static_cast<unsigned long long>(flags), found,
                                 index >= 0 ? "wrapper " : "no wrapper (not a wrapped function's address)",
                                 index >= 0 ? gmt::interpose::driver_hook_name(index) : "");
  }
  return index >= 0 ? gmt::interpose::driver_wrapper(index) : found;
}

}  // namespace

// Every recording wrapper starts the same way. The real call runs inside the guard, so that driver functions
// the driver calls through its own exports are not counted twice; the guard says that a wrapper that records
// holds it, so that under run --verify CUPTI's callback for the same call records it too (recorder/guard.h).
#define GMT_DRIVER_PROLOGUE(name, args)              \
  gmt::interpose::ensure_backend_started();          \
  auto real = GMT_DRIVER_REAL(name);                 \
  if (!real) return kNoDriver;                       \
  if (!hooks_record()) return real args;             \
  HookScope scope(HookScope::Holder::DriverWrapper); \
  if (!scope.active()) return real args

// ---- initialization and entry points -------------------------------------------------------------------

// The app's first driver call: the earliest moment to decide the backend when no injection path is set.
extern "C" CUresult cuInit(unsigned int Flags) {
  gmt::interpose::ensure_backend_started();
  auto real = GMT_DRIVER_REAL(cuInit);
  return real ? real(Flags) : kNoDriver;
}

// No ensure_backend_started in these two: cudart calls them hundreds of times inside its own initialization,
// and what they hand out does not depend on the backend (the wrappers pass through unless the hooks count).
extern "C" CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
  auto real = GMT_DRIVER_REAL(cuGetProcAddress);
  if (!real) return kNoDriver;
  CUresult result = real(symbol, pfn, cudaVersion, flags);
  if (result == CUDA_SUCCESS && pfn && *pfn) *pfn = substitute(symbol, *pfn, cudaVersion, flags);
  return result;
}

extern "C" CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                                        CUdriverProcAddressQueryResult* symbolStatus) {
  auto real = GMT_DRIVER_REAL(cuGetProcAddress_v2);
  if (!real) return kNoDriver;
  CUresult result = real(symbol, pfn, cudaVersion, flags, symbolStatus);
  if (result == CUDA_SUCCESS && pfn && *pfn) *pfn = substitute(symbol, *pfn, cudaVersion, flags);
  return result;
}

// ---- context destruction -------------------------------------------------------------------------------
// Passed through, and counted for the device cache (device_of_current_context): a primary context released for
// the last time or reset is destroyed too. cuda.h maps the plain names to these versions; the unversioned
// cuCtxDestroy of CUDA before 4.0 is not wrapped.

#define GMT_DRIVER_CONTEXT_DESTRUCTION(name, Param) \
  extern "C" CUresult name(Param argument) {        \
    auto real = GMT_DRIVER_REAL(name);              \
    if (!real) return kNoDriver;                    \
    ContextDestruction destruction;                 \
    return real(argument);                          \
  }
GMT_DRIVER_CONTEXT_DESTRUCTION(cuCtxDestroy_v2, CUcontext)
GMT_DRIVER_CONTEXT_DESTRUCTION(cuDevicePrimaryCtxRelease_v2, CUdevice)
GMT_DRIVER_CONTEXT_DESTRUCTION(cuDevicePrimaryCtxReset_v2, CUdevice)
GMT_DRIVER_CONTEXT_DESTRUCTION(cuGreenCtxDestroy, CUgreenCtx)
#undef GMT_DRIVER_CONTEXT_DESTRUCTION

// ---- the driver catalog's functions ---------------------------------------------------------------------
// One wrapper each: the prologue, then the call handed to its row with its arguments packed into the parameter
// struct CUPTI's callbacks carry (<function>_params, in the same order: C++20's parenthesized aggregate
// initialization takes the argument list as it is). The allocation and free paths are GMT_HOT.

#define GMT_DRIVER_WRAPPER(attributes, name, params, args)               \
  extern "C" attributes CUresult name params {                           \
    GMT_DRIVER_PROLOGUE(name, args);                                     \
    return recorded_call(name##_params args, [&] { return real args; }); \
  }

// Allocations and frees.
GMT_DRIVER_WRAPPER(GMT_HOT, cuMemAlloc_v2, (CUdeviceptr * dptr, size_t bytesize), (dptr, bytesize))
GMT_DRIVER_WRAPPER(GMT_HOT, cuMemAllocPitch_v2,
                   (CUdeviceptr * dptr, size_t* pPitch, size_t WidthInBytes, size_t Height,
                    unsigned int ElementSizeBytes),
                   (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes))
GMT_DRIVER_WRAPPER(GMT_HOT, cuMemAllocManaged, (CUdeviceptr * dptr, size_t bytesize, unsigned int flags),
                   (dptr, bytesize, flags))
GMT_DRIVER_WRAPPER(GMT_HOT, cuMemAllocHost_v2, (void** pp, size_t bytesize), (pp, bytesize))
GMT_DRIVER_WRAPPER(GMT_HOT, cuMemHostAlloc, (void** pp, size_t bytesize, unsigned int Flags), (pp, bytesize, Flags))
GMT_DRIVER_WRAPPER(GMT_HOT, cuMemFree_v2, (CUdeviceptr dptr), (dptr))
GMT_DRIVER_WRAPPER(GMT_HOT, cuMemFreeHost, (void* p), (p))

// Stream-ordered allocations and pools.
GMT_DRIVER_WRAPPER(GMT_HOT, cuMemAllocAsync, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream),
                   (dptr, bytesize, hStream))
GMT_DRIVER_WRAPPER(GMT_HOT, cuMemAllocAsync_ptsz, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream),
                   (dptr, bytesize, hStream))
GMT_DRIVER_WRAPPER(GMT_HOT, cuMemAllocFromPoolAsync,
                   (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),
                   (dptr, bytesize, pool, hStream))
GMT_DRIVER_WRAPPER(GMT_HOT, cuMemAllocFromPoolAsync_ptsz,
                   (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),
                   (dptr, bytesize, pool, hStream))
GMT_DRIVER_WRAPPER(GMT_HOT, cuMemFreeAsync, (CUdeviceptr dptr, CUstream hStream), (dptr, hStream))
GMT_DRIVER_WRAPPER(GMT_HOT, cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream hStream), (dptr, hStream))
GMT_DRIVER_WRAPPER(, cuMemPoolCreate, (CUmemoryPool * pool, const CUmemPoolProps* poolProps), (pool, poolProps))
GMT_DRIVER_WRAPPER(, cuMemPoolDestroy, (CUmemoryPool pool), (pool))
GMT_DRIVER_WRAPPER(, cuMemPoolTrimTo, (CUmemoryPool pool, size_t minBytesToKeep), (pool, minBytesToKeep))

// Virtual memory management.
GMT_DRIVER_WRAPPER(, cuMemCreate,
                   (CUmemGenericAllocationHandle * handle, size_t size, const CUmemAllocationProp* prop,
                    unsigned long long flags),
                   (handle, size, prop, flags))
GMT_DRIVER_WRAPPER(, cuMemRelease, (CUmemGenericAllocationHandle handle), (handle))
GMT_DRIVER_WRAPPER(, cuMemMap,
                   (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                    unsigned long long flags),
                   (ptr, size, offset, handle, flags))
GMT_DRIVER_WRAPPER(, cuMemUnmap, (CUdeviceptr ptr, size_t size), (ptr, size))
GMT_DRIVER_WRAPPER(, cuMemAddressReserve,
                   (CUdeviceptr * ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags),
                   (ptr, size, alignment, addr, flags))
GMT_DRIVER_WRAPPER(, cuMemAddressFree, (CUdeviceptr ptr, size_t size), (ptr, size))

// Memory imported from other processes.
GMT_DRIVER_WRAPPER(, cuIpcOpenMemHandle, (CUdeviceptr * pdptr, CUipcMemHandle handle, unsigned int Flags),
                   (pdptr, handle, Flags))
GMT_DRIVER_WRAPPER(, cuIpcOpenMemHandle_v2, (CUdeviceptr * pdptr, CUipcMemHandle handle, unsigned int Flags),
                   (pdptr, handle, Flags))
GMT_DRIVER_WRAPPER(, cuIpcCloseMemHandle, (CUdeviceptr dptr), (dptr))
GMT_DRIVER_WRAPPER(, cuMemImportFromShareableHandle,
                   (CUmemGenericAllocationHandle * handle, void* osHandle, CUmemAllocationHandleType shHandleType),
                   (handle, osHandle, shHandleType))

// Stream capture: counted, so that an allocation on a capturing stream is known as a graph node.
GMT_DRIVER_WRAPPER(, cuStreamBeginCapture_v2, (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode))
GMT_DRIVER_WRAPPER(, cuStreamBeginCapture_v2_ptsz, (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode))
#define GMT_CAPTURE_TO_GRAPH_PARAMS                                                                          \
  (CUstream hStream, CUgraph hGraph, const CUgraphNode* dependencies, const CUgraphEdgeData* dependencyData, \
   size_t numDependencies, CUstreamCaptureMode mode)
#define GMT_CAPTURE_TO_GRAPH_ARGS (hStream, hGraph, dependencies, dependencyData, numDependencies, mode)
GMT_DRIVER_WRAPPER(, cuStreamBeginCaptureToGraph, GMT_CAPTURE_TO_GRAPH_PARAMS, GMT_CAPTURE_TO_GRAPH_ARGS)
GMT_DRIVER_WRAPPER(, cuStreamBeginCaptureToGraph_ptsz, GMT_CAPTURE_TO_GRAPH_PARAMS, GMT_CAPTURE_TO_GRAPH_ARGS)
#undef GMT_CAPTURE_TO_GRAPH_ARGS
#undef GMT_CAPTURE_TO_GRAPH_PARAMS
GMT_DRIVER_WRAPPER(, cuStreamEndCapture, (CUstream hStream, CUgraph* phGraph), (hStream, phGraph))
GMT_DRIVER_WRAPPER(, cuStreamEndCapture_ptsz, (CUstream hStream, CUgraph* phGraph), (hStream, phGraph))

// CUDA graphs' memory nodes (recorder/graph_memory.h).
GMT_DRIVER_WRAPPER(, cuGraphAddMemAllocNode,
                   (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies, size_t numDependencies,
                    CUDA_MEM_ALLOC_NODE_PARAMS* nodeParams),
                   (phGraphNode, hGraph, dependencies, numDependencies, nodeParams))
GMT_DRIVER_WRAPPER(, cuGraphInstantiateWithFlags, (CUgraphExec * phGraphExec, CUgraph hGraph, unsigned long long flags),
                   (phGraphExec, hGraph, flags))
GMT_DRIVER_WRAPPER(, cuGraphInstantiateWithParams,
                   (CUgraphExec * phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams),
                   (phGraphExec, hGraph, instantiateParams))
GMT_DRIVER_WRAPPER(, cuGraphInstantiateWithParams_ptsz,
                   (CUgraphExec * phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams),
                   (phGraphExec, hGraph, instantiateParams))
GMT_DRIVER_WRAPPER(, cuGraphLaunch, (CUgraphExec hGraph, CUstream hStream), (hGraph, hStream))
GMT_DRIVER_WRAPPER(, cuGraphLaunch_ptsz, (CUgraphExec hGraphExec, CUstream hStream), (hGraphExec, hStream))
GMT_DRIVER_WRAPPER(, cuGraphExecDestroy, (CUgraphExec hGraphExec), (hGraphExec))
#undef GMT_DRIVER_WRAPPER

// ---- the wrapper table -------------------------------------------------------------------------------------

// Hidden aliases of the wrappers: their addresses are taken PC-relative, so the table holds our own functions
// even where the exported name would resolve elsewhere (the library loaded without LD_PRELOAD, say). `copy`
// gives each alias its target's attributes (GMT_HOT, where it has it).
#define GMT_DRIVER_ALIAS(name, ...) \
  extern "C"                        \
      __attribute__((visibility("hidden"), alias(#name), copy(::name))) decltype(::name) gmt_driver_wrapper_##name;
GMT_DRIVER_HOOKS(GMT_DRIVER_ALIAS)
#undef GMT_DRIVER_ALIAS

namespace gmt::interpose {

// A switch, not an array: no initializer to run, so it is valid inside dlsym before our constructors.
void* driver_wrapper(int index) {
  switch (static_cast<DriverFn>(index)) {
#define GMT_DRIVER_CASE(name, ...) \
  case DriverFn::name: return reinterpret_cast<void*>(&gmt_driver_wrapper_##name);
    GMT_DRIVER_HOOKS(GMT_DRIVER_CASE)
#undef GMT_DRIVER_CASE
    default: break;
  }
  return nullptr;
}

}  // namespace gmt::interpose
