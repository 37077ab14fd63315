// Streams and events. Work is never queued (every operation completes inside the call that issues
// it), so streams are just validated handles that remember their device, flags and priority;
// synchronising is always immediate and queries always report completion. Events record the host
// time at which they were recorded, which makes cudaEventElapsedTime measure real host time.
#include <algorithm>
#include <mutex>

#include "sim_runtime.h"

using gmt::sim::Event;
using gmt::sim::finish;
using gmt::sim::Runtime;
using gmt::sim::Stream;

namespace {

// Hopper's priority range, also reported by cudaDeviceGetStreamPriorityRange.
constexpr int kLeastPriority = 0;
constexpr int kGreatestPriority = -5;

cudaError_t create_stream(cudaStream_t* out, unsigned flags, int priority) {
  if (out == nullptr) return cudaErrorInvalidValue;
  if ((flags & ~static_cast<unsigned>(cudaStreamNonBlocking)) != 0) return cudaErrorInvalidValue;
  Runtime& rt = Runtime::get();
  const int device = gmt::sim::current_device();
  if (const cudaError_t e = rt.check_device(device); e != cudaSuccess) return e;
  // Out-of-range priorities are clamped, as documented for the real call.
  priority = std::clamp(priority, kGreatestPriority, kLeastPriority);
  auto* stream = new Stream{device, flags, priority, rt.next_stream_id++};
  std::lock_guard lock(rt.objects_mutex);
  rt.streams.insert(stream);
  *out = reinterpret_cast<cudaStream_t>(stream);
  return cudaSuccess;
}

// Looks a stream up for a query; the special handles describe the current device's default stream.
cudaError_t query_stream(cudaStream_t handle, Stream* out) {
  Runtime& rt = Runtime::get();
  if (handle == nullptr || handle == cudaStreamLegacy || handle == cudaStreamPerThread) {
    const int device = gmt::sim::current_device();
    if (const cudaError_t e = rt.check_device(device); e != cudaSuccess) return e;
    // Ids 0..2 are free: created streams count from 1, so give the default streams the handle
    // value plus a high bit to keep them distinct from every created stream.
    const auto special = reinterpret_cast<std::uintptr_t>(handle);
    *out = Stream{device, 0, kLeastPriority, (1ull << 63) | special};
    return cudaSuccess;
  }
  std::lock_guard lock(rt.objects_mutex);
  const auto it = rt.streams.find(reinterpret_cast<Stream*>(handle));
  if (it == rt.streams.end()) return cudaErrorInvalidResourceHandle;
  *out = **it;
  return cudaSuccess;
}

cudaError_t check_stream(cudaStream_t stream) {
  int device = 0;
  return Runtime::get().stream_device(stream, &device);
}

// Runs `fn` on the event under the objects lock, or reports an unknown handle.
template <typename Fn>
cudaError_t with_event(cudaEvent_t handle, Fn&& fn) {
  Runtime& rt = Runtime::get();
  std::lock_guard lock(rt.objects_mutex);
  const auto it = rt.events.find(reinterpret_cast<Event*>(handle));
  if (it == rt.events.end()) return cudaErrorInvalidResourceHandle;
  return fn(**it);
}

cudaError_t create_event(cudaEvent_t* out, unsigned flags) {
  if (out == nullptr) return cudaErrorInvalidValue;
  constexpr unsigned kKnownFlags = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
  if ((flags & ~kKnownFlags) != 0) return cudaErrorInvalidValue;
  // Interprocess events must disable timing, per the API contract.
  if ((flags & cudaEventInterprocess) != 0 && (flags & cudaEventDisableTiming) == 0) {
    return cudaErrorInvalidValue;
  }
  Runtime& rt = Runtime::get();
  const int device = gmt::sim::current_device();
  if (const cudaError_t e = rt.check_device(device); e != cudaSuccess) return e;
  auto* event = new Event{device, flags, false, {}};
  std::lock_guard lock(rt.objects_mutex);
  rt.events.insert(event);
  *out = reinterpret_cast<cudaEvent_t>(event);
  return cudaSuccess;
}

cudaError_t record_event(cudaEvent_t event, cudaStream_t stream) {
  if (const cudaError_t e = check_stream(stream); e != cudaSuccess) return e;
  return with_event(event, [](Event& e) {
    e.recorded = true;
    e.when = std::chrono::steady_clock::now();
    return cudaSuccess;
  });
}

cudaError_t wait_event(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
  if ((flags & ~static_cast<unsigned>(cudaEventWaitExternal)) != 0) return cudaErrorInvalidValue;
  if (const cudaError_t e = check_stream(stream); e != cudaSuccess) return e;
  return with_event(event, [](Event&) { return cudaSuccess; });  // already complete
}

}  // namespace

extern "C" {

cudaError_t cudaStreamCreate(cudaStream_t* pStream) { return finish(create_stream(pStream, 0, kLeastPriority)); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
  return finish(create_stream(pStream, flags, kLeastPriority));
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* pStream, unsigned int flags, int priority) {
  return finish(create_stream(pStream, flags, priority));
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  Runtime& rt = Runtime::get();
  std::lock_guard lock(rt.objects_mutex);
  auto* handle = reinterpret_cast<Stream*>(stream);
  if (rt.streams.erase(handle) == 0) return finish(cudaErrorInvalidResourceHandle);
  delete handle;
  return cudaSuccess;
}

// A synchronization: pools give back their reservation above their release threshold (Pool::reserved).
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  const cudaError_t e = check_stream(stream);
  if (e == cudaSuccess) Runtime::get().release_pool_reservations();
  return finish(e);
}

cudaError_t cudaStreamQuery(cudaStream_t stream) { return finish(check_stream(stream)); }

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  return finish(wait_event(stream, event, flags));
}

cudaError_t cudaStreamGetFlags(cudaStream_t hStream, unsigned int* flags) {
  Stream s;
  if (flags == nullptr) return finish(cudaErrorInvalidValue);
  if (const cudaError_t e = query_stream(hStream, &s); e != cudaSuccess) return finish(e);
  *flags = s.flags;
  return cudaSuccess;
}

cudaError_t cudaStreamGetPriority(cudaStream_t hStream, int* priority) {
  Stream s;
  if (priority == nullptr) return finish(cudaErrorInvalidValue);
  if (const cudaError_t e = query_stream(hStream, &s); e != cudaSuccess) return finish(e);
  *priority = s.priority;
  return cudaSuccess;
}

cudaError_t cudaStreamGetDevice(cudaStream_t hStream, int* device) {
  Stream s;
  if (device == nullptr) return finish(cudaErrorInvalidValue);
  if (const cudaError_t e = query_stream(hStream, &s); e != cudaSuccess) return finish(e);
  *device = s.device;
  return cudaSuccess;
}

cudaError_t cudaStreamGetId(cudaStream_t hStream, unsigned long long* streamId) {
  Stream s;
  if (streamId == nullptr) return finish(cudaErrorInvalidValue);
  if (const cudaError_t e = query_stream(hStream, &s); e != cudaSuccess) return finish(e);
  *streamId = s.id;
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* pCaptureStatus) {
  if (pCaptureStatus == nullptr) return finish(cudaErrorInvalidValue);
  if (const cudaError_t e = check_stream(stream); e != cudaSuccess) return finish(e);
  *pCaptureStatus = cudaStreamCaptureStatusNone;  // graphs are not simulated
  return cudaSuccess;
}

cudaError_t cudaStreamAttachMemAsync(cudaStream_t stream, void* /*devPtr*/, size_t /*length*/, unsigned int flags) {
  constexpr unsigned kKnownFlags = cudaMemAttachGlobal | cudaMemAttachHost | cudaMemAttachSingle;
  if ((flags & ~kKnownFlags) != 0) return finish(cudaErrorInvalidValue);
  return finish(check_stream(stream));  // all memory is visible to everyone anyway
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* userData) {
  if (fn == nullptr) return finish(cudaErrorInvalidValue);
  if (const cudaError_t e = check_stream(stream); e != cudaSuccess) return finish(e);
  fn(userData);  // everything before it in the stream is already done
  return cudaSuccess;
}

cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void* userData,
                                  unsigned int flags) {
  if (callback == nullptr || flags != 0) return finish(cudaErrorInvalidValue);
  if (const cudaError_t e = check_stream(stream); e != cudaSuccess) return finish(e);
  callback(stream, cudaSuccess, userData);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return finish(create_event(event, cudaEventDefault)); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  return finish(create_event(event, flags));
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) { return finish(record_event(event, stream)); }

cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
  if ((flags & ~static_cast<unsigned>(cudaEventRecordExternal)) != 0) return finish(cudaErrorInvalidValue);
  return finish(record_event(event, stream));
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  return finish(with_event(event, [](Event&) { return cudaSuccess; }));
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  const cudaError_t e = with_event(event, [](Event&) { return cudaSuccess; });
  if (e == cudaSuccess) Runtime::get().release_pool_reservations();
  return finish(e);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr) return finish(cudaErrorInvalidValue);
  Runtime& rt = Runtime::get();
  std::lock_guard lock(rt.objects_mutex);
  const auto first = rt.events.find(reinterpret_cast<Event*>(start));
  const auto last = rt.events.find(reinterpret_cast<Event*>(end));
  if (first == rt.events.end() || last == rt.events.end()) return finish(cudaErrorInvalidResourceHandle);
  const Event& a = **first;
  const Event& b = **last;
  if (!a.recorded || !b.recorded) return finish(cudaErrorInvalidResourceHandle);
  if (((a.flags | b.flags) & cudaEventDisableTiming) != 0) return finish(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(b.when - a.when).count();
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  Runtime& rt = Runtime::get();
  std::lock_guard lock(rt.objects_mutex);
  auto* handle = reinterpret_cast<Event*>(event);
  if (rt.events.erase(handle) == 0) return finish(cudaErrorInvalidResourceHandle);
  delete handle;
  return cudaSuccess;
}

}  // extern "C"

// Per-thread-default-stream twins (see GMT_SIM_TWIN).
GMT_SIM_TWIN(cudaStreamSynchronize_ptsz, cudaStreamSynchronize, (cudaStream_t stream));
GMT_SIM_TWIN(cudaStreamQuery_ptsz, cudaStreamQuery, (cudaStream_t stream));
GMT_SIM_TWIN(cudaStreamWaitEvent_ptsz, cudaStreamWaitEvent,
             (cudaStream_t stream, cudaEvent_t event, unsigned int flags));
GMT_SIM_TWIN(cudaStreamGetFlags_ptsz, cudaStreamGetFlags, (cudaStream_t hStream, unsigned int* flags));
GMT_SIM_TWIN(cudaStreamGetPriority_ptsz, cudaStreamGetPriority, (cudaStream_t hStream, int* priority));
GMT_SIM_TWIN(cudaStreamGetDevice_ptsz, cudaStreamGetDevice, (cudaStream_t hStream, int* device));
GMT_SIM_TWIN(cudaStreamGetId_ptsz, cudaStreamGetId, (cudaStream_t hStream, unsigned long long* streamId));
GMT_SIM_TWIN(cudaStreamIsCapturing_ptsz, cudaStreamIsCapturing,
             (cudaStream_t stream, cudaStreamCaptureStatus* pCaptureStatus));
GMT_SIM_TWIN(cudaStreamAttachMemAsync_ptsz, cudaStreamAttachMemAsync,
             (cudaStream_t stream, void* devPtr, size_t length, unsigned int flags));
GMT_SIM_TWIN(cudaLaunchHostFunc_ptsz, cudaLaunchHostFunc, (cudaStream_t stream, cudaHostFn_t fn, void* userData));
GMT_SIM_TWIN(cudaStreamAddCallback_ptsz, cudaStreamAddCallback,
             (cudaStream_t stream, cudaStreamCallback_t callback, void* userData, unsigned int flags));
GMT_SIM_TWIN(cudaEventRecord_ptsz, cudaEventRecord, (cudaEvent_t event, cudaStream_t stream));
GMT_SIM_TWIN(cudaEventRecordWithFlags_ptsz, cudaEventRecordWithFlags,
             (cudaEvent_t event, cudaStream_t stream, unsigned int flags));
