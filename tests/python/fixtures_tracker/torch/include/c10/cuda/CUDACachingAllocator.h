// TEST FIXTURE, not PyTorch (../../../../README.md): the part of PyTorch's c10/cuda/CUDACachingAllocator.h that
// gpumemtrace's bridge (python/gpumemtrace_inprocess/torch_bridge.cpp) uses, with the same names and shapes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

namespace c10 {
using CaptureId_t = unsigned long long;
using MempoolId_t = std::pair<CaptureId_t, CaptureId_t>;  // {0, 0}: the default pools
}  // namespace c10

namespace c10::cuda::CUDACachingAllocator {

struct TraceEntry {
  enum Action {
    ALLOC,
    FREE_REQUESTED,
    FREE_COMPLETED,
    SEGMENT_ALLOC,
    SEGMENT_FREE,
    SEGMENT_MAP,
    SEGMENT_UNMAP,
    SNAPSHOT,
    OOM
  };
  Action action_;
  int8_t device_;
  size_t addr_;
  void* stream_{};
  size_t size_;
  MempoolId_t mempool_{};
};

using AllocatorTraceTracker = std::function<void(const TraceEntry&)>;

class CUDAAllocator {
 public:
  virtual ~CUDAAllocator() = default;
  virtual std::string name() = 0;
  virtual bool initialized() = 0;
  virtual void attachAllocatorTraceTracker(AllocatorTraceTracker tracker) = 0;
};

extern std::atomic<CUDAAllocator*> allocator;

inline CUDAAllocator* get() { return allocator.load(); }

inline void attachAllocatorTraceTracker(AllocatorTraceTracker tracker) {
  get()->attachAllocatorTraceTracker(std::move(tracker));
}

}  // namespace c10::cuda::CUDACachingAllocator
