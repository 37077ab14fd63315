#include "recorder/capture_safety.h"

#include <cuda.h>
#include <dlfcn.h>

#include <atomic>

#include "recorder/cache_hints.h"

namespace gmt::recorder {
namespace {

using ExchangeModeFn = CUresult (*)(CUstreamCaptureMode*);
using IsCapturingFn = CUresult (*)(CUstream, CUstreamCaptureStatus*);

struct CaptureFunctions {
  ExchangeModeFn exchange_mode = nullptr;
  IsCapturingFn is_capturing = nullptr;
};

// From the libcuda the app loaded (never loads it: without a driver nothing can capture, and the simulated runtime
// has none). No backend wraps either function, so these are the driver's own. Resolved again until found: the
// first caller may run before the app loaded libcuda.
const CaptureFunctions* capture_functions() {
  static std::atomic<const CaptureFunctions*> resolved{nullptr};
  if (const CaptureFunctions* f = resolved.load(std::memory_order_acquire)) return f;
  void* cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!cuda) return nullptr;
  auto* f = new CaptureFunctions;  // one per process; a racing thread's copy is leaked, never freed under a reader
  f->exchange_mode = reinterpret_cast<ExchangeModeFn>(dlsym(cuda, "cuThreadExchangeStreamCaptureMode"));
  f->is_capturing = reinterpret_cast<IsCapturingFn>(dlsym(cuda, "cuStreamIsCapturing"));
  dlclose(cuda);  // NOLOAD took a reference of its own; the app's keeps libcuda loaded
  const CaptureFunctions* expected = nullptr;
  if (!resolved.compare_exchange_strong(expected, f, std::memory_order_acq_rel)) return expected;
  return f;
}

std::atomic<int> g_captures{0};

}  // namespace

RelaxedCaptureScope::RelaxedCaptureScope() {
  const CaptureFunctions* f = capture_functions();
  if (!f || !f->exchange_mode) return;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (f->exchange_mode(&mode) != CUDA_SUCCESS) return;
  previous_mode_ = static_cast<int>(mode);
  exchanged_ = true;
}

RelaxedCaptureScope::~RelaxedCaptureScope() {
  if (!exchanged_) return;
  auto mode = static_cast<CUstreamCaptureMode>(previous_mode_);
  capture_functions()->exchange_mode(&mode);
}

void note_capture_begun() { g_captures.fetch_add(1, std::memory_order_acq_rel); }

void note_capture_end_returned(int result) {
  if (result != CUDA_SUCCESS && result != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED &&
      result != CUDA_ERROR_STREAM_CAPTURE_UNJOINED) {
    return;  // not capturing (CUDA_ERROR_ILLEGAL_STATE), or the wrong thread: the capture, if any, goes on
  }
  int count = g_captures.load(std::memory_order_acquire);
  while (count > 0 && !g_captures.compare_exchange_weak(count, count - 1, std::memory_order_acq_rel)) {
  }
}

GMT_HOT bool stream_is_capturing(uint64_t stream) {
  if (__builtin_expect(g_captures.load(std::memory_order_relaxed) == 0, 1)) return false;
  const CaptureFunctions* f = capture_functions();
  if (!f || !f->is_capturing) return false;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (f->is_capturing(reinterpret_cast<CUstream>(stream), &status) != CUDA_SUCCESS) return false;
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

int captures_in_progress() { return g_captures.load(std::memory_order_acquire); }

}  // namespace gmt::recorder
