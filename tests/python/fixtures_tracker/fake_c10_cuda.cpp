// TEST FIXTURE, not PyTorch (README.md): a caching allocator that hands out blocks inside one segment, first fit,
// and calls the attached trace trackers on every action while holding its lock, as PyTorch's does. Built into
// torch/lib/libc10_cuda.so of the fixture package by tests/python/CMakeLists.txt.
#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "c10/cuda/CUDACachingAllocator.h"

namespace c10::cuda::CUDACachingAllocator {
namespace {

class FixtureAllocator final : public CUDAAllocator {
 public:
  std::string name() override {
    const char* backend = std::getenv("FIXTURE_ALLOCATOR_BACKEND");
    return backend ? backend : "native";
  }
  bool initialized() override { return segment_size_ != 0; }
  void attachAllocatorTraceTracker(AllocatorTraceTracker tracker) override {
    std::lock_guard lock(mutex_);
    trackers_.push_back(std::move(tracker));
  }

  void init(size_t base, size_t size) {
    std::lock_guard lock(mutex_);
    segment_base_ = base;
    segment_size_ = size;
    free_[base] = size;
  }
  size_t allocate(size_t size) {
    std::lock_guard lock(mutex_);
    size = (size + 511) / 512 * 512;  // PyTorch rounds to 512 bytes
    if (!segment_traced_) {           // PyTorch takes its first segment at the first allocation, not at init
      segment_traced_ = true;
      trace(TraceEntry::SEGMENT_ALLOC, segment_base_, segment_size_);
    }
    if (size_t address = take(size)) return address;
    // No block fits: as PyTorch's malloc, a new segment from CUDA, and when that fails, a second try after giving
    // back the cache (the fixture caches nothing it could give back); then the request fails.
    for (int attempt = 0; attempt < 2; ++attempt) {
      void* segment = nullptr;
      if (cuda_malloc(&segment, size) == 0) {
        free_[reinterpret_cast<size_t>(segment)] = size;
        trace(TraceEntry::SEGMENT_ALLOC, reinterpret_cast<size_t>(segment), size);
        return take(size);
      }
    }
    trace(TraceEntry::OOM, 0, size);
    return 0;
  }
  void release(size_t address) {
    std::lock_guard lock(mutex_);
    auto it = used_.find(address);
    if (it == used_.end()) return;
    const size_t size = it->second;
    used_.erase(it);
    trace(TraceEntry::FREE_REQUESTED, address, size);
    free_[address] = size;
    merge(address);
    trace(TraceEntry::FREE_COMPLETED, address, size);
  }

 private:
  size_t take(size_t size) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < size) continue;
      const size_t address = it->first, left = it->second - size;
      free_.erase(it);
      if (left) free_[address + size] = left;
      used_[address] = size;
      trace(TraceEntry::ALLOC, address, size);
      return address;
    }
    return 0;
  }
  // The runtime's cudaMalloc as the app's libraries see it (the preloaded hooks first), as libc10_cuda imports it.
  static int cuda_malloc(void** pointer, size_t size) {
    using CudaMalloc = int (*)(void**, size_t);
    static const auto function = reinterpret_cast<CudaMalloc>(dlsym(RTLD_DEFAULT, "cudaMalloc"));
    return function ? function(pointer, size) : 2;  // cudaErrorMemoryAllocation without a runtime
  }
  // FIXTURE_ALLOCATOR_POOL=N: every block and segment is of memory pool {N, 0}, as those of a CUDA graph's private
  // pool are (PyTorch numbers them so during a capture).
  void trace(TraceEntry::Action action, size_t address, size_t size) {
    static const unsigned long long pool = [] {
      const char* text = std::getenv("FIXTURE_ALLOCATOR_POOL");
      return text ? std::strtoull(text, nullptr, 10) : 0ULL;
    }();
    TraceEntry entry{action, 0, address, nullptr, size, {pool, 0}};
    for (const auto& tracker : trackers_) tracker(entry);
  }
  void merge(size_t address) {
    auto it = free_.find(address);
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto previous = std::prev(it);
      if (previous->first + previous->second == it->first) {
        previous->second += it->second;
        free_.erase(it);
      }
    }
  }

  std::mutex mutex_;
  std::vector<AllocatorTraceTracker> trackers_;
  size_t segment_base_ = 0, segment_size_ = 0;
  bool segment_traced_ = false;
  std::map<size_t, size_t> free_, used_;
};

FixtureAllocator g_fixture;

}  // namespace

std::atomic<CUDAAllocator*> allocator{&g_fixture};

}  // namespace c10::cuda::CUDACachingAllocator

using c10::cuda::CUDACachingAllocator::g_fixture;

extern "C" {
void fixture_init(size_t base, size_t size) { g_fixture.init(base, size); }
size_t fixture_allocate(size_t size) { return g_fixture.allocate(size); }
// Autograd's engine, as PyTorch runs it: the backward pass on a worker thread of its own, which has no Python frames,
// allocating the gradient there. The caller waits for it; `hold_ms` before and after the allocation keeps the call
// open long enough for calls of other threads to overlap it.
size_t fixture_backward(size_t size, int hold_ms) {
  size_t address = 0;
  std::thread worker([&address, size, hold_ms] {
    std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
    address = g_fixture.allocate(size);
    std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
  });
  worker.join();
  return address;
}
void fixture_release(size_t address) { g_fixture.release(address); }
}
