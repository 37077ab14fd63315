// The "hooks" backend (recorder/backend.h): wrapped CUDA driver entry points, the default where they bind
// (interpose/backend_choice.h). driver_hook_table.h lists them and says how the app reaches them. Each wrapper is
// thin: decide the backend, find the real function, pass straight through unless the driver hooks record (they
// count, or cross-check CUPTI under run --verify), and otherwise record one event through
// recorder/driver_events.h, the same calls the CUPTI backend makes.
// Allocations are recorded after they return (failures as failures), frees and other releases before the real
// call: the address or handle can be reused by another thread the moment it returns (STYLE.md rule 5).
#include <atomic>
#include <optional>

#include "interpose/backend_start.h"
#include "interpose/driver_api.h"
#include "interpose/driver_hook_table.h"
#include "recorder/backend.h"
#include "recorder/cache_hints.h"
#include "recorder/capture_safety.h"
#include "recorder/driver_events.h"
#include "recorder/graph_memory.h"
#include "recorder/guard.h"

namespace {

using gmt::recorder::DeviceMemoryInfo;
using gmt::recorder::DriverCall;
using gmt::recorder::HookScope;
using gmt::schema::Api;
using gmt::schema::EventKind;
using gmt::schema::MemoryKind;

// What a wrapper returns when there is no driver behind it: reachable only through our exported symbols
// (dlsym(RTLD_DEFAULT, ...) finds them first) in a process where libcuda.so.1 cannot be loaded.
constexpr CUresult kNoDriver = CUDA_ERROR_NOT_INITIALIZED;

GMT_HOT bool hooks_record() { return gmt::recorder::records_through(gmt::recorder::Backend::DriverHooks); }

GMT_HOT uint64_t current_context() {
  CUcontext context = nullptr;
  auto get_current = GMT_DRIVER_REAL(cuCtxGetCurrent);
  if (get_current && get_current(&context) == CUDA_SUCCESS) return reinterpret_cast<uint64_t>(context);
  return 0;
}

// The device of the calling thread's current context, asked of the driver once per context and thread.
// cuCtxGetDevice is what made a hooked event dear with 8 threads allocating at once on the H200 (1.46x of a
// raw cudaMallocAsync pair with it, 1.10x without; cuCtxGetCurrent, still asked every time, costs nothing
// there: docs/benchmarks.md). A context's device never changes, but its address can be reused once it is
// destroyed: every destruction (the wrappers at "context destruction" below) counts itself in progress while
// it runs, when no answer is kept or used, and moves the generation on when it is done, which makes every
// answer kept before stale. Both counts share one atomic word, so that an event reads them with one load from
// one cache line: the destructions running in the low bits, the generation above them.
constexpr int kGenerationShift = 20;  // up to 2^20 - 1 destructions at once
constexpr uint64_t kRunningMask = (uint64_t{1} << kGenerationShift) - 1;
std::atomic<uint64_t> g_context_destructions{0};

struct ContextDevice {
  uint64_t context = 0;
  uint64_t generation = 0;
  int16_t device = -1;
};
thread_local ContextDevice t_context_device __attribute__((tls_model("initial-exec")));

GMT_HOT int16_t device_of_current_context(uint64_t context) {
  if (context == 0) return -1;  // none current: the driver would say CUDA_ERROR_INVALID_CONTEXT
  const uint64_t destructions = g_context_destructions.load(std::memory_order_acquire);
  const bool settled = (destructions & kRunningMask) == 0;
  const uint64_t generation = destructions >> kGenerationShift;
  ContextDevice& kept = t_context_device;
  if (settled && kept.context == context && kept.generation == generation) return kept.device;
  CUdevice device = -1;
  auto get_device = GMT_DRIVER_REAL(cuCtxGetDevice);
  if (!get_device || get_device(&device) != CUDA_SUCCESS) return -1;
  if (settled) kept = ContextDevice{context, generation, static_cast<int16_t>(device)};
  return static_cast<int16_t>(device);
}

// Around every call that can destroy a context (see device_of_current_context).
class ContextDestruction {
 public:
  ContextDestruction() { g_context_destructions.fetch_add(1, std::memory_order_acq_rel); }
  // One running less and the generation one on, in one step: generation += 1 << shift, running -= 1.
  ~ContextDestruction() {
    g_context_destructions.fetch_add((uint64_t{1} << kGenerationShift) - 1, std::memory_order_acq_rel);
  }
  ContextDestruction(const ContextDestruction&) = delete;
  ContextDestruction& operator=(const ContextDestruction&) = delete;
};

// `device` = -2: ask the current context (host-pinned memory has no device: no query).
GMT_HOT DriverCall make_call(Api api, CUresult result, MemoryKind kind, CUstream stream = nullptr, int device = -2) {
  DriverCall call;
  call.driver_api = api;
  call.source = gmt::schema::Source::DriverHook;
  call.result = static_cast<int32_t>(result);
  call.context = current_context();
  call.device = device != -2                     ? static_cast<int16_t>(device)
                : kind == MemoryKind::HostPinned ? int16_t{-1}
                                                 : device_of_current_context(call.context);
  call.stream = reinterpret_cast<uint64_t>(stream);
  return call;
}

int device_of(const CUmemLocation& location) {
  return location.type == CU_MEM_LOCATION_TYPE_DEVICE ? location.id : -1;
}

// OOM forensics: what the device said was free right after an out-of-memory error. Only then: after other
// errors the context may be unusable.
GMT_HOT std::optional<DeviceMemoryInfo> memory_after_oom(CUresult result, MemoryKind kind) {
  if (result != CUDA_ERROR_OUT_OF_MEMORY || kind == MemoryKind::HostPinned) return std::nullopt;
  size_t free_bytes = 0, total_bytes = 0;
  gmt::recorder::RelaxedCaptureScope relaxed;  // not stream-ordered (capture_safety.h)
  auto get_info = GMT_DRIVER_REAL(cuMemGetInfo_v2);
  if (!get_info || get_info(&free_bytes, &total_bytes) != CUDA_SUCCESS) return std::nullopt;
  return DeviceMemoryInfo{free_bytes, total_bytes};
}

// The address an allocation wrote, read only after it succeeded.
uint64_t written(CUresult result, const CUdeviceptr* out) { return result == CUDA_SUCCESS && out ? *out : 0; }
uint64_t written(CUresult result, void* const* out) {
  return result == CUDA_SUCCESS && out ? reinterpret_cast<uint64_t>(*out) : 0;
}

GMT_HOT void record_alloc(Api api, MemoryKind kind, CUresult result, uint64_t address, uint64_t size,
                          CUstream stream = nullptr, CUmemoryPool pool = nullptr) {
  gmt::recorder::record_driver_alloc(make_call(api, result, kind, stream), kind, address, size,
                                     reinterpret_cast<uint64_t>(pool), memory_after_oom(result, kind));
}

GMT_HOT void record_free(Api api, MemoryKind kind, uint64_t address, CUstream stream = nullptr) {
  if (address == 0) return;  // freeing null is a no-op: skip the driver queries too
  gmt::recorder::record_driver_free(make_call(api, CUDA_SUCCESS, kind, stream), kind, address);
}

// Pool and VMM events; record_driver_event keeps only successful calls ("before" events pass CUDA_SUCCESS).
void record_event(Api api, EventKind kind, CUresult result, uint64_t address, uint64_t size, uint64_t handle,
                  int device = -2) {
  if (result != CUDA_SUCCESS) return;
  gmt::recorder::record_driver_event(make_call(api, result, MemoryKind::None, nullptr, device), kind, address,
                                     size, handle);
}

// The driver's answer to cuGetProcAddress, with our wrapper in place of a function we wrap. Matched by
// address against libcuda's exported functions, so whatever version the driver picked for (symbol,
// cudaVersion, flags), the wrapper handed out is the one of exactly that function; no match, no change.
void* substitute(const char* symbol, void* found, int cuda_version, cuuint64_t flags) {
  int index = gmt::interpose::driver_hook_for_real(found);
  if (gmt::interpose::driver_debug_enabled() && (index >= 0 || (symbol && symbol[0] == 'c' && symbol[1] == 'u' &&
                                                                symbol[2] == 'M' && symbol[3] == 'e'))) {
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
#define GMT_DRIVER_PROLOGUE(name, args)                \
  gmt::interpose::ensure_backend_started();           \
  auto real = GMT_DRIVER_REAL(name);                  \
  if (!real) return kNoDriver;                        \
  if (!hooks_record()) return real args;              \
  HookScope scope(HookScope::Holder::DriverWrapper);  \
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

#define GMT_DRIVER_CONTEXT_DESTRUCTION(name, Param)  \
  extern "C" CUresult name(Param argument) {          \
    auto real = GMT_DRIVER_REAL(name);                \
    if (!real) return kNoDriver;                      \
    ContextDestruction destruction;                   \
    return real(argument);                            \
  }
GMT_DRIVER_CONTEXT_DESTRUCTION(cuCtxDestroy_v2, CUcontext)
GMT_DRIVER_CONTEXT_DESTRUCTION(cuDevicePrimaryCtxRelease_v2, CUdevice)
GMT_DRIVER_CONTEXT_DESTRUCTION(cuDevicePrimaryCtxReset_v2, CUdevice)
GMT_DRIVER_CONTEXT_DESTRUCTION(cuGreenCtxDestroy, CUgreenCtx)
#undef GMT_DRIVER_CONTEXT_DESTRUCTION

// ---- allocations -------------------------------------------------------------------------------------------

extern "C" GMT_HOT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  GMT_DRIVER_PROLOGUE(cuMemAlloc_v2, (dptr, bytesize));
  CUresult result = real(dptr, bytesize);
  record_alloc(Api::cuMemAlloc, MemoryKind::Device, result, written(result, dptr), bytesize);
  return result;
}

// Accounted at the granted size (pitch x rows), which is what the device holds; a failure at the request.
extern "C" GMT_HOT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes, size_t Height,
                                               unsigned int ElementSizeBytes) {
  GMT_DRIVER_PROLOGUE(cuMemAllocPitch_v2, (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
  CUresult result = real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
  uint64_t size = result == CUDA_SUCCESS && pPitch ? *pPitch * Height : WidthInBytes * Height;
  record_alloc(Api::cuMemAllocPitch, MemoryKind::Device, result, written(result, dptr), size);
  return result;
}

extern "C" GMT_HOT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  GMT_DRIVER_PROLOGUE(cuMemAllocManaged, (dptr, bytesize, flags));
  CUresult result = real(dptr, bytesize, flags);
  record_alloc(Api::cuMemAllocManaged, MemoryKind::Managed, result, written(result, dptr), bytesize);
  return result;
}

extern "C" GMT_HOT CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
  GMT_DRIVER_PROLOGUE(cuMemAllocHost_v2, (pp, bytesize));
  CUresult result = real(pp, bytesize);
  record_alloc(Api::cuMemAllocHost, MemoryKind::HostPinned, result, written(result, pp), bytesize);
  return result;
}

extern "C" GMT_HOT CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
  GMT_DRIVER_PROLOGUE(cuMemHostAlloc, (pp, bytesize, Flags));
  CUresult result = real(pp, bytesize, Flags);
  record_alloc(Api::cuMemHostAlloc, MemoryKind::HostPinned, result, written(result, pp), bytesize);
  return result;
}

// The _ptsz twins record under the plain call's id: to the user they are the same call.
#define GMT_DRIVER_ALLOC_ASYNC(name)                                                                          \
  extern "C" GMT_HOT CUresult name(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {                    \
    GMT_DRIVER_PROLOGUE(name, (dptr, bytesize, hStream));                                                     \
    CUresult result = real(dptr, bytesize, hStream);                                                          \
    record_alloc(Api::cuMemAllocAsync, MemoryKind::Device, result, written(result, dptr), bytesize, hStream); \
    return result;                                                                                            \
  }
GMT_DRIVER_ALLOC_ASYNC(cuMemAllocAsync)
GMT_DRIVER_ALLOC_ASYNC(cuMemAllocAsync_ptsz)

#define GMT_DRIVER_ALLOC_FROM_POOL(name)                                                                      \
  extern "C" GMT_HOT CUresult name(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) { \
    GMT_DRIVER_PROLOGUE(name, (dptr, bytesize, pool, hStream));                                               \
    CUresult result = real(dptr, bytesize, pool, hStream);                                                    \
    record_alloc(Api::cuMemAllocFromPoolAsync, MemoryKind::Device, result, written(result, dptr), bytesize,   \
                 hStream, pool);                                                                              \
    return result;                                                                                            \
  }
GMT_DRIVER_ALLOC_FROM_POOL(cuMemAllocFromPoolAsync)
GMT_DRIVER_ALLOC_FROM_POOL(cuMemAllocFromPoolAsync_ptsz)

// ---- frees -------------------------------------------------------------------------------------------------

extern "C" GMT_HOT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  GMT_DRIVER_PROLOGUE(cuMemFree_v2, (dptr));
  record_free(Api::cuMemFree, MemoryKind::Device, dptr);
  return real(dptr);
}

extern "C" GMT_HOT CUresult cuMemFreeHost(void* p) {
  GMT_DRIVER_PROLOGUE(cuMemFreeHost, (p));
  record_free(Api::cuMemFreeHost, MemoryKind::HostPinned, reinterpret_cast<uint64_t>(p));
  return real(p);
}

#define GMT_DRIVER_FREE_ASYNC(name)                                      \
  extern "C" GMT_HOT CUresult name(CUdeviceptr dptr, CUstream hStream) { \
    GMT_DRIVER_PROLOGUE(name, (dptr, hStream));                          \
    record_free(Api::cuMemFreeAsync, MemoryKind::Device, dptr, hStream); \
    return real(dptr, hStream);                                          \
  }
GMT_DRIVER_FREE_ASYNC(cuMemFreeAsync)
GMT_DRIVER_FREE_ASYNC(cuMemFreeAsync_ptsz)

// ---- stream-ordered memory pools ---------------------------------------------------------------------------

extern "C" CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* poolProps) {
  GMT_DRIVER_PROLOGUE(cuMemPoolCreate, (pool, poolProps));
  CUresult result = real(pool, poolProps);
  if (result == CUDA_SUCCESS && pool)
    record_event(Api::cuMemPoolCreate, EventKind::PoolCreate, result, reinterpret_cast<uint64_t>(*pool), 0, 0,
                 poolProps ? device_of(poolProps->location) : -2);
  return result;
}

extern "C" CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  GMT_DRIVER_PROLOGUE(cuMemPoolDestroy, (pool));
  record_event(Api::cuMemPoolDestroy, EventKind::PoolDestroy, CUDA_SUCCESS, reinterpret_cast<uint64_t>(pool), 0, 0);
  return real(pool);
}

extern "C" CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  GMT_DRIVER_PROLOGUE(cuMemPoolTrimTo, (pool, minBytesToKeep));
  CUresult result = real(pool, minBytesToKeep);
  record_event(Api::cuMemPoolTrimTo, EventKind::PoolTrim, result, reinterpret_cast<uint64_t>(pool), minBytesToKeep,
               0);
  return result;
}

// ---- virtual memory management -----------------------------------------------------------------------------

extern "C" CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                                unsigned long long flags) {
  GMT_DRIVER_PROLOGUE(cuMemCreate, (handle, size, prop, flags));
  CUresult result = real(handle, size, prop, flags);
  // The device is the one the physical memory lives on, not the current context's.
  if (result == CUDA_SUCCESS && handle)
    record_event(Api::cuMemCreate, EventKind::VmmCreate, result, 0, size, *handle,
                 prop ? device_of(prop->location) : -2);
  return result;
}

extern "C" CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  GMT_DRIVER_PROLOGUE(cuMemRelease, (handle));
  record_event(Api::cuMemRelease, EventKind::VmmRelease, CUDA_SUCCESS, 0, 0, handle);
  return real(handle);
}

extern "C" CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                             unsigned long long flags) {
  GMT_DRIVER_PROLOGUE(cuMemMap, (ptr, size, offset, handle, flags));
  CUresult result = real(ptr, size, offset, handle, flags);
  record_event(Api::cuMemMap, EventKind::VmmMap, result, ptr, size, handle);
  return result;
}

extern "C" CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  GMT_DRIVER_PROLOGUE(cuMemUnmap, (ptr, size));
  record_event(Api::cuMemUnmap, EventKind::VmmUnmap, CUDA_SUCCESS, ptr, size, 0);
  return real(ptr, size);
}

extern "C" CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                        unsigned long long flags) {
  GMT_DRIVER_PROLOGUE(cuMemAddressReserve, (ptr, size, alignment, addr, flags));
  CUresult result = real(ptr, size, alignment, addr, flags);
  if (result == CUDA_SUCCESS && ptr)
    record_event(Api::cuMemAddressReserve, EventKind::VmmReserve, result, *ptr, size, 0);
  return result;
}

extern "C" CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  GMT_DRIVER_PROLOGUE(cuMemAddressFree, (ptr, size));
  record_event(Api::cuMemAddressFree, EventKind::VmmAddressFree, CUDA_SUCCESS, ptr, size, 0);
  return real(ptr, size);
}

// ---- memory imported from other processes --------------------------------------------------------------
// Rare calls: the recorder asks the driver for the opened range's size and device (driver_queries.h), inside
// the guard, through functions no backend wraps.

#define GMT_DRIVER_IPC_OPEN(name)                                                          \
  extern "C" CUresult name(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int Flags) { \
    GMT_DRIVER_PROLOGUE(name, (pdptr, handle, Flags));                                      \
    CUresult result = real(pdptr, handle, Flags);                                           \
    gmt::recorder::record_ipc_open(make_call(Api::cuIpcOpenMemHandle_v2, result, MemoryKind::IpcImported), \
                                   written(result, pdptr));                                 \
    return result;                                                                          \
  }
GMT_DRIVER_IPC_OPEN(cuIpcOpenMemHandle)
GMT_DRIVER_IPC_OPEN(cuIpcOpenMemHandle_v2)
#undef GMT_DRIVER_IPC_OPEN

extern "C" CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  GMT_DRIVER_PROLOGUE(cuIpcCloseMemHandle, (dptr));
  gmt::recorder::record_ipc_close(make_call(Api::cuIpcCloseMemHandle, CUDA_SUCCESS, MemoryKind::IpcImported), dptr);
  return real(dptr);
}

extern "C" CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle,
                                                   CUmemAllocationHandleType shHandleType) {
  GMT_DRIVER_PROLOGUE(cuMemImportFromShareableHandle, (handle, osHandle, shHandleType));
  CUresult result = real(handle, osHandle, shHandleType);
  if (result == CUDA_SUCCESS && handle) {
    gmt::recorder::record_vmm_import(make_call(Api::cuMemImportFromShareableHandle, result, MemoryKind::None),
                                     *handle);
  }
  return result;
}

// ---- stream capture ----------------------------------------------------------------------------------------
// Counted for the event path (recorder/capture_safety.h): an allocation on a capturing stream is a graph node,
// not memory yet. Nothing else happens here.

#define GMT_DRIVER_BEGIN_CAPTURE(name, params, args)                 \
  extern "C" CUresult name params {                                  \
    GMT_DRIVER_PROLOGUE(name, args);                                 \
    CUresult result = real args;                                     \
    if (result == CUDA_SUCCESS) gmt::recorder::note_capture_begun(); \
    return result;                                                   \
  }
#define GMT_CAPTURE_TO_GRAPH_PARAMS                                                                           \
  (CUstream hStream, CUgraph hGraph, const CUgraphNode* dependencies, const CUgraphEdgeData* dependencyData, \
   size_t numDependencies, CUstreamCaptureMode mode)
#define GMT_CAPTURE_TO_GRAPH_ARGS (hStream, hGraph, dependencies, dependencyData, numDependencies, mode)
GMT_DRIVER_BEGIN_CAPTURE(cuStreamBeginCapture_v2, (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode))
GMT_DRIVER_BEGIN_CAPTURE(cuStreamBeginCapture_v2_ptsz, (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode))
GMT_DRIVER_BEGIN_CAPTURE(cuStreamBeginCaptureToGraph, GMT_CAPTURE_TO_GRAPH_PARAMS, GMT_CAPTURE_TO_GRAPH_ARGS)
GMT_DRIVER_BEGIN_CAPTURE(cuStreamBeginCaptureToGraph_ptsz, GMT_CAPTURE_TO_GRAPH_PARAMS, GMT_CAPTURE_TO_GRAPH_ARGS)
#undef GMT_CAPTURE_TO_GRAPH_ARGS
#undef GMT_CAPTURE_TO_GRAPH_PARAMS
#undef GMT_DRIVER_BEGIN_CAPTURE

// The capture ends whether or not the graph is valid; note_capture_end_returned tells from the result.
#define GMT_DRIVER_END_CAPTURE(name)                                    \
  extern "C" CUresult name(CUstream hStream, CUgraph* phGraph) {        \
    GMT_DRIVER_PROLOGUE(name, (hStream, phGraph));                      \
    CUresult result = real(hStream, phGraph);                           \
    gmt::recorder::note_capture_end_returned(static_cast<int>(result)); \
    return result;                                                      \
  }
GMT_DRIVER_END_CAPTURE(cuStreamEndCapture)
GMT_DRIVER_END_CAPTURE(cuStreamEndCapture_ptsz)
#undef GMT_DRIVER_END_CAPTURE

// ---- CUDA graphs' memory nodes (recorder/graph_memory.h) --------------------------------------------------

extern "C" CUresult cuGraphAddMemAllocNode(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies,
                                           size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS* nodeParams) {
  GMT_DRIVER_PROLOGUE(cuGraphAddMemAllocNode, (phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
  CUresult result = real(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
  if (result == CUDA_SUCCESS && nodeParams) {
    gmt::recorder::record_graph_alloc_node(make_call(Api::cudaMallocAsync, result, MemoryKind::Device),
                                           nodeParams->dptr, nodeParams->bytesize);
  }
  return result;
}

extern "C" CUresult cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph, unsigned long long flags) {
  GMT_DRIVER_PROLOGUE(cuGraphInstantiateWithFlags, (phGraphExec, hGraph, flags));
  CUresult result = real(phGraphExec, hGraph, flags);
  if (result == CUDA_SUCCESS && phGraphExec) {
    gmt::recorder::note_graph_instantiated(reinterpret_cast<uint64_t>(*phGraphExec), reinterpret_cast<uint64_t>(hGraph),
                                           flags);
  }
  return result;
}

#define GMT_DRIVER_INSTANTIATE_WITH_PARAMS(name)                                                             \
  extern "C" CUresult name(CUgraphExec* phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) { \
    GMT_DRIVER_PROLOGUE(name, (phGraphExec, hGraph, params));                                                \
    CUresult result = real(phGraphExec, hGraph, params);                                                     \
    if (result == CUDA_SUCCESS && phGraphExec) {                                                             \
      gmt::recorder::note_graph_instantiated(reinterpret_cast<uint64_t>(*phGraphExec),                      \
                                             reinterpret_cast<uint64_t>(hGraph), params ? params->flags : 0); \
    }                                                                                                        \
    return result;                                                                                           \
  }
GMT_DRIVER_INSTANTIATE_WITH_PARAMS(cuGraphInstantiateWithParams)
GMT_DRIVER_INSTANTIATE_WITH_PARAMS(cuGraphInstantiateWithParams_ptsz)
#undef GMT_DRIVER_INSTANTIATE_WITH_PARAMS

#define GMT_DRIVER_GRAPH_LAUNCH(name)                                                                 \
  extern "C" CUresult name(CUgraphExec hGraphExec, CUstream hStream) {                                \
    GMT_DRIVER_PROLOGUE(name, (hGraphExec, hStream));                                                 \
    CUresult result = real(hGraphExec, hStream);                                                      \
    if (result == CUDA_SUCCESS) {                                                                     \
      gmt::recorder::record_graph_launch(make_call(Api::graphMemAlloc, result, MemoryKind::Device, hStream), \
                                         reinterpret_cast<uint64_t>(hGraphExec));                     \
    }                                                                                                 \
    return result;                                                                                    \
  }
GMT_DRIVER_GRAPH_LAUNCH(cuGraphLaunch)
GMT_DRIVER_GRAPH_LAUNCH(cuGraphLaunch_ptsz)
#undef GMT_DRIVER_GRAPH_LAUNCH

extern "C" CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
  GMT_DRIVER_PROLOGUE(cuGraphExecDestroy, (hGraphExec));
  gmt::recorder::forget_graph_exec(reinterpret_cast<uint64_t>(hGraphExec));
  return real(hGraphExec);
}

// ---- the wrapper table -------------------------------------------------------------------------------------

// Hidden aliases of the wrappers: their addresses are taken PC-relative, so the table holds our own functions
// even where the exported name would resolve elsewhere (the library loaded without LD_PRELOAD, say). `copy`
// gives each alias its target's attributes (GMT_HOT, where it has it).
#define GMT_DRIVER_ALIAS(name) \
  extern "C" __attribute__((visibility("hidden"), alias(#name), copy(::name))) decltype(::name) \
      gmt_driver_wrapper_##name;
GMT_DRIVER_HOOKS(GMT_DRIVER_ALIAS)
#undef GMT_DRIVER_ALIAS

namespace gmt::interpose {

// A switch, not an array: no initializer to run, so it is valid inside dlsym before our constructors.
void* driver_wrapper(int index) {
  switch (static_cast<DriverFn>(index)) {
#define GMT_DRIVER_CASE(name) \
  case DriverFn::name: return reinterpret_cast<void*>(&gmt_driver_wrapper_##name);
    GMT_DRIVER_HOOKS(GMT_DRIVER_CASE)
#undef GMT_DRIVER_CASE
    default: break;
  }
  return nullptr;
}

}  // namespace gmt::interpose
