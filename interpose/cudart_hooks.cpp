// The preloaded CUDA runtime hooks. Each hook: take the guard, call the real function, hand one event to the
// recorder. Allocations are recorded after they succeed, frees before the real free runs (the address can be
// reused by another thread the moment it returns: docs/design.md, "Inside the process").
//
// When a driver-level backend counts (CUPTI or the driver hooks, recorder/backend.h), the allocation and free
// hooks record nothing themselves: they only name the runtime call in progress, so the driver-level event for
// the same allocation is reported under the name the app used. Nothing is counted twice. The allocation hooks
// also take the app's stack before the call (recorder/caller_stack.h): the driver-level event uses it instead
// of walking through the CUDA libraries' frames.
#include <cuda_runtime_api.h>

#include "interpose/backend_start.h"
#include "interpose/context_device.h"
#include "interpose/hook_table.h"
#include "recorder/backend.h"
#include "recorder/cache_hints.h"
#include "recorder/caller_stack.h"
#include "recorder/capture_safety.h"
#include "recorder/driver_queries.h"
#include "recorder/guard.h"
#include "recorder/recorder.h"
#include "recorder/settings.h"

// The per-thread-default-stream twins are exported by libcudart but not declared unless a program is built
// with --default-stream per-thread; declare them with the same signatures as the plain calls.
extern "C" {
cudaError_t cudaMallocAsync_ptsz(void** devPtr, size_t size, cudaStream_t stream);
cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream);
cudaError_t cudaFreeAsync_ptsz(void* devPtr, cudaStream_t stream);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream);
}

namespace {

using gmt::recorder::EventRecord;
using gmt::recorder::HookScope;
using gmt::schema::Api;
using gmt::schema::EventKind;
using gmt::schema::MemoryKind;

// What a hook returns when no CUDA runtime is loaded behind it (only reachable through dlsym tricks).
constexpr cudaError_t kNoRuntime = cudaErrorInitializationError;

GMT_HOT EventRecord make_event(EventKind kind, Api api, MemoryKind memory_kind, cudaStream_t stream) {
  EventRecord e;
  e.time_ns = gmt::recorder::now_ns();
  e.thread_id = gmt::recorder::current_thread_id();
  e.kind = kind;
  e.api = api;
  e.memory_kind = memory_kind;
  e.call.stream = reinterpret_cast<uint64_t>(stream);
  return e;
}

// The device the call ran on: that of the thread's current driver context, the one a runtime call operates on
// (interpose/context_device.h), its device kept per thread. cudaGetDevice, asked on every event before, costs
// ~40 ns a call on an H100 (bench/launch_cost.py, docs/benchmarks.md): two per allocation+free pair. It is still
// the answer where no context is current or no driver is loaded (the simulated runtime).
GMT_HOT int16_t current_device() {
  const int16_t of_context = gmt::interpose::device_of_current_context(gmt::interpose::current_context());
  if (of_context >= 0) return of_context;
  int device = -1;
  auto get_device = GMT_REAL(cudaGetDevice);
  if (get_device && get_device(&device) == cudaSuccess) return static_cast<int16_t>(device);
  return -1;
}

GMT_HOT void record_allocation(Api api, MemoryKind memory_kind, cudaError_t result, const void* address, size_t size,
                               cudaStream_t stream = nullptr, cudaMemPool_t pool = nullptr) {
  EventRecord e =
      make_event(result == cudaSuccess ? EventKind::Alloc : EventKind::AllocFailed, api, memory_kind, stream);
  e.call.size = size;
  e.call.error = static_cast<int32_t>(result);
  e.call.handle = reinterpret_cast<uint64_t>(pool);  // a FromPool call's pool: its used bytes (analysis/model/pools.h)
  e.device = memory_kind == MemoryKind::HostPinned ? -1 : current_device();
  if (result == cudaSuccess) {
    e.call.address = reinterpret_cast<uint64_t>(address);
  } else if (result == cudaErrorMemoryAllocation && memory_kind != MemoryKind::HostPinned) {
    // OOM forensics: what the device said was free when the request failed. Only on out-of-memory: after
    // other errors the context may be unusable, and a second failing call would replace the app's last error.
    size_t free_bytes = 0, total_bytes = 0;
    gmt::recorder::RelaxedCaptureScope relaxed;  // not stream-ordered (capture_safety.h)
    auto mem_get_info = GMT_REAL(cudaMemGetInfo);
    if (mem_get_info && mem_get_info(&free_bytes, &total_bytes) == cudaSuccess) {
      e.call.has_memory_info = true;
      e.call.device_free = free_bytes;
      e.call.device_total = total_bytes;
    }
  }
  gmt::recorder::record(e, /*take_stack=*/true);
}

GMT_HOT void record_free(Api api, MemoryKind memory_kind, const void* address, cudaStream_t stream = nullptr) {
  EventRecord e = make_event(EventKind::Free, api, memory_kind, stream);
  e.call.address = reinterpret_cast<uint64_t>(address);
  e.device = memory_kind == MemoryKind::HostPinned ? -1 : current_device();
  gmt::recorder::record(e, gmt::recorder::settings().take_free_stacks);
}

void record_stream_event(EventKind kind, Api api, cudaStream_t stream, cudaError_t result, bool take_stack) {
  if (result != cudaSuccess) return;
  EventRecord e = make_event(kind, api, MemoryKind::None, stream);
  e.device = current_device();
  gmt::recorder::record(e, take_stack);
}

// Another process's memory opened here: memory kind IpcImported, with the size of the opened range and the
// device the memory lives on (driver_queries.h asks the driver, or the simulator's entry points), not the
// current device. Rare calls: the two queries are affordable.
void record_ipc_open(const void* address) {
  EventRecord e = make_event(EventKind::Alloc, Api::cudaIpcOpenMemHandle, MemoryKind::IpcImported, nullptr);
  e.call.address = reinterpret_cast<uint64_t>(address);
  gmt::recorder::ImportedRange range = gmt::recorder::describe_imported(e.call.address);
  e.call.size = range.size;
  e.device = range.device >= 0 ? range.device : current_device();
  gmt::recorder::record(e, /*take_stack=*/true);
}

void record_ipc_close(const void* address) {
  EventRecord e = make_event(EventKind::Free, Api::cudaIpcCloseMemHandle, MemoryKind::IpcImported, nullptr);
  e.call.address = reinterpret_cast<uint64_t>(address);
  gmt::recorder::ImportedRange range = gmt::recorder::describe_imported(e.call.address);  // before the close runs
  e.device = range.device >= 0 ? range.device : current_device();
  gmt::recorder::record(e, gmt::recorder::settings().take_free_stacks);
}

}  // namespace

// ---- allocations -------------------------------------------------------------------------------------------

// `api` is the id recorded: the _ptsz twins record under the plain call's id, since to the user they are the
// same call.
#define GMT_POOL_ALLOC_HOOK_AS(name, api, memory_kind, ptr_expr, size_expr, stream_expr, pool_expr, params, args) \
  extern "C" GMT_HOT cudaError_t name params {                                                                    \
    auto real = GMT_REAL(name);                                                                                   \
    if (!real) return kNoRuntime;                                                                                 \
    gmt::interpose::ensure_backend_started();                                                                     \
    if (gmt::recorder::driver_level_backend()) {                                                                  \
      gmt::recorder::RuntimeApiScope naming(Api::api);                                                            \
      gmt::recorder::CallerStack caller_stack(gmt::recorder::a_hook_here_would_record());                         \
      return real args;                                                                                           \
    }                                                                                                             \
    HookScope scope;                                                                                              \
    gmt::recorder::CallerStack caller_stack(scope.active());                                                      \
    cudaError_t result = real args;                                                                               \
    if (scope.active())                                                                                           \
      record_allocation(Api::api, memory_kind, result, result == cudaSuccess ? (ptr_expr) : nullptr, size_expr,   \
                        stream_expr, pool_expr);                                                                  \
    return result;                                                                                                \
  }
#define GMT_ALLOC_HOOK_AS(name, api, memory_kind, ptr_expr, size_expr, stream_expr, params, args) \
  GMT_POOL_ALLOC_HOOK_AS(name, api, memory_kind, ptr_expr, size_expr, stream_expr, nullptr, params, args)
#define GMT_ALLOC_HOOK(name, ...) GMT_ALLOC_HOOK_AS(name, name, __VA_ARGS__)

GMT_ALLOC_HOOK(cudaMalloc, MemoryKind::Device, *devPtr, size, nullptr, (void** devPtr, size_t size), (devPtr, size))
GMT_ALLOC_HOOK(cudaMallocManaged, MemoryKind::Managed, *devPtr, size, nullptr,
               (void** devPtr, size_t size, unsigned int flags), (devPtr, size, flags))
GMT_ALLOC_HOOK(cudaMallocHost, MemoryKind::HostPinned, *ptr, size, nullptr, (void** ptr, size_t size), (ptr, size))
GMT_ALLOC_HOOK(cudaHostAlloc, MemoryKind::HostPinned, *pHost, size, nullptr,
               (void** pHost, size_t size, unsigned int flags), (pHost, size, flags))
// Pitched allocations are accounted at their granted size (pitch x rows), which is what the device holds.
GMT_ALLOC_HOOK(cudaMallocPitch, MemoryKind::Device, *devPtr, result == cudaSuccess ? *pitch * height : width * height,
               nullptr, (void** devPtr, size_t* pitch, size_t width, size_t height), (devPtr, pitch, width, height))
GMT_ALLOC_HOOK(cudaMalloc3D, MemoryKind::Device, pitchedDevPtr->ptr,
               result == cudaSuccess ? pitchedDevPtr->pitch * extent.height * extent.depth
                                     : extent.width * extent.height * extent.depth,
               nullptr, (struct cudaPitchedPtr * pitchedDevPtr, struct cudaExtent extent), (pitchedDevPtr, extent))
GMT_ALLOC_HOOK(cudaMallocAsync, MemoryKind::Device, *devPtr, size, stream,
               (void** devPtr, size_t size, cudaStream_t stream), (devPtr, size, stream))
GMT_ALLOC_HOOK_AS(cudaMallocAsync_ptsz, cudaMallocAsync, MemoryKind::Device, *devPtr, size, stream,
                  (void** devPtr, size_t size, cudaStream_t stream), (devPtr, size, stream))
GMT_POOL_ALLOC_HOOK_AS(cudaMallocFromPoolAsync, cudaMallocFromPoolAsync, MemoryKind::Device, *ptr, size, stream,
                       memPool, (void** ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream),
                       (ptr, size, memPool, stream))
GMT_POOL_ALLOC_HOOK_AS(cudaMallocFromPoolAsync_ptsz, cudaMallocFromPoolAsync, MemoryKind::Device, *ptr, size, stream,
                       memPool, (void** ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream),
                       (ptr, size, memPool, stream))

// ---- frees -------------------------------------------------------------------------------------------------

#define GMT_FREE_HOOK(name, api, memory_kind, ptr_name, stream_expr, params, args)             \
  extern "C" GMT_HOT cudaError_t name params {                                                 \
    auto real = GMT_REAL(name);                                                                \
    if (!real) return kNoRuntime;                                                              \
    gmt::interpose::ensure_backend_started();                                                  \
    if (gmt::recorder::driver_level_backend()) {                                               \
      gmt::recorder::RuntimeApiScope naming(Api::api);                                         \
      return real args;                                                                        \
    }                                                                                          \
    HookScope scope;                                                                           \
    /* cudaFree(nullptr) is the idiom for "create the context": not a free. */                 \
    if (scope.active() && ptr_name) record_free(Api::api, memory_kind, ptr_name, stream_expr); \
    return real args;                                                                          \
  }

GMT_FREE_HOOK(cudaFree, cudaFree, MemoryKind::Device, devPtr, nullptr, (void* devPtr), (devPtr))
GMT_FREE_HOOK(cudaFreeHost, cudaFreeHost, MemoryKind::HostPinned, ptr, nullptr, (void* ptr), (ptr))
GMT_FREE_HOOK(cudaFreeAsync, cudaFreeAsync, MemoryKind::Device, devPtr, stream, (void* devPtr, cudaStream_t stream),
              (devPtr, stream))
GMT_FREE_HOOK(cudaFreeAsync_ptsz, cudaFreeAsync, MemoryKind::Device, devPtr, stream,
              (void* devPtr, cudaStream_t stream), (devPtr, stream))

// ---- streams and synchronization ---------------------------------------------------------------------------

extern "C" cudaError_t cudaStreamCreate(cudaStream_t* pStream) {
  auto real = GMT_REAL(cudaStreamCreate);
  if (!real) return kNoRuntime;
  HookScope scope;
  cudaError_t result = real(pStream);
  if (scope.active()) record_stream_event(EventKind::StreamCreate, Api::cudaStreamCreate, *pStream, result, true);
  return result;
}

extern "C" cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
  auto real = GMT_REAL(cudaStreamCreateWithFlags);
  if (!real) return kNoRuntime;
  HookScope scope;
  cudaError_t result = real(pStream, flags);
  if (scope.active())
    record_stream_event(EventKind::StreamCreate, Api::cudaStreamCreateWithFlags, *pStream, result, true);
  return result;
}

extern "C" cudaError_t cudaStreamCreateWithPriority(cudaStream_t* pStream, unsigned int flags, int priority) {
  auto real = GMT_REAL(cudaStreamCreateWithPriority);
  if (!real) return kNoRuntime;
  HookScope scope;
  cudaError_t result = real(pStream, flags, priority);
  if (scope.active())
    record_stream_event(EventKind::StreamCreate, Api::cudaStreamCreateWithPriority, *pStream, result, true);
  return result;
}

extern "C" cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  auto real = GMT_REAL(cudaStreamDestroy);
  if (!real) return kNoRuntime;
  HookScope scope;
  if (scope.active()) record_stream_event(EventKind::StreamDestroy, Api::cudaStreamDestroy, stream, cudaSuccess, true);
  return real(stream);
}

// Synchronizations carry no stack: they are frequent, and only their time matters (when async frees land).
extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  auto real = GMT_REAL(cudaStreamSynchronize);
  if (!real) return kNoRuntime;
  HookScope scope;
  cudaError_t result = real(stream);
  if (scope.active()) record_stream_event(EventKind::Synchronize, Api::cudaStreamSynchronize, stream, result, false);
  return result;
}

extern "C" cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream) {
  auto real = GMT_REAL(cudaStreamSynchronize_ptsz);
  if (!real) return kNoRuntime;
  HookScope scope;
  cudaError_t result = real(stream);
  if (scope.active()) record_stream_event(EventKind::Synchronize, Api::cudaStreamSynchronize, stream, result, false);
  return result;
}

extern "C" cudaError_t cudaDeviceSynchronize(void) {
  auto real = GMT_REAL(cudaDeviceSynchronize);
  if (!real) return kNoRuntime;
  HookScope scope;
  cudaError_t result = real();
  if (scope.active()) record_stream_event(EventKind::Synchronize, Api::cudaDeviceSynchronize, nullptr, result, false);
  return result;
}

// ---- memory imported from other processes --------------------------------------------------------------

extern "C" cudaError_t cudaIpcOpenMemHandle(void** devPtr, cudaIpcMemHandle_t handle, unsigned int flags) {
  auto real = GMT_REAL(cudaIpcOpenMemHandle);
  if (!real) return kNoRuntime;
  gmt::interpose::ensure_backend_started();
  if (gmt::recorder::driver_level_backend()) {
    gmt::recorder::RuntimeApiScope naming(Api::cudaIpcOpenMemHandle);
    return real(devPtr, handle, flags);
  }
  HookScope scope;
  cudaError_t result = real(devPtr, handle, flags);
  // A failed open holds nothing and is no allocation failure: not recorded.
  if (scope.active() && result == cudaSuccess && devPtr && *devPtr) record_ipc_open(*devPtr);
  return result;
}

extern "C" cudaError_t cudaIpcCloseMemHandle(void* devPtr) {
  auto real = GMT_REAL(cudaIpcCloseMemHandle);
  if (!real) return kNoRuntime;
  gmt::interpose::ensure_backend_started();
  if (gmt::recorder::driver_level_backend()) {
    gmt::recorder::RuntimeApiScope naming(Api::cudaIpcCloseMemHandle);
    return real(devPtr);
  }
  HookScope scope;
  if (scope.active() && devPtr) record_ipc_close(devPtr);
  return real(devPtr);
}
