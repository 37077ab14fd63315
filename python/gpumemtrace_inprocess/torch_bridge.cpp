// The PyTorch bridge: compiled against the profiled app's own torch (its headers and C++ ABI) by
// torch_tracker.py, once per torch build, into a per-user cache, and loaded into the app's process once torch has
// set up its CUDA caching allocator. It attaches a trace tracker to that allocator
// (c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker, public since torch 2.1), which PyTorch calls on
// every allocator action, with or without its own memory history, and forwards each action to the preloaded
// library's gmt_torch_allocator_action_in_pool (recorder/framework_blocks.h), with the memory pool of the block where
// this torch's TraceEntry names one (mempool_: CUDA graphs' private pools). The tracker runs under the allocator's
// lock, on the thread that allocates: it takes no lock and no GIL, allocates nothing and never throws.
#include <c10/cuda/CUDACachingAllocator.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <type_traits>
#include <utility>

namespace {

namespace allocator = c10::cuda::CUDACachingAllocator;
using Entry = allocator::TraceEntry;

using RecordFn = void (*)(int action, int device, uint64_t address, uint64_t size, uint64_t stream, uint64_t pool);
RecordFn g_record = nullptr;

// TraceEntry::mempool_ (a MempoolId_t pair) exists in newer torch (2.11 has it); an older one records pool 0, the
// default pools.
template <typename E, typename = void>
struct HasMempool : std::false_type {};
template <typename E>
struct HasMempool<E, std::void_t<decltype(std::declval<const E&>().mempool_)>> : std::true_type {};

template <typename E>
uint64_t pool_of(const E& entry) {
  if constexpr (HasMempool<E>::value) {
    return (static_cast<uint64_t>(entry.mempool_.first) << 32) |
           (static_cast<uint64_t>(entry.mempool_.second) & 0xffffffffu);
  } else {
    return 0;
  }
}

// recorder/framework_blocks.h numbers the actions; mapped by name, so a torch whose enum order differs maps alike.
int action_code(Entry::Action action) {
  switch (action) {
    case Entry::ALLOC: return 1;
    case Entry::FREE_REQUESTED: return 2;
    case Entry::FREE_COMPLETED: return 3;
    case Entry::SEGMENT_ALLOC: return 4;
    case Entry::SEGMENT_FREE: return 5;
    case Entry::SEGMENT_MAP: return 6;
    case Entry::SEGMENT_UNMAP: return 7;
    case Entry::OOM: return 8;
    default: return 0;  // SNAPSHOT, and actions of later torch versions
  }
}

void on_trace_entry(const Entry& entry) {
  const int code = action_code(entry.action_);
  if (code == 0) return;
  g_record(code, static_cast<int>(entry.device_), static_cast<uint64_t>(entry.addr_),
           static_cast<uint64_t>(entry.size_), reinterpret_cast<uint64_t>(entry.stream_), pool_of(entry));
}

void say(char* why, size_t why_size, const std::string& text) {
  if (why && why_size) std::snprintf(why, why_size, "%s", text.c_str());
}

bool g_attached = false;

}  // namespace

extern "C" {

// Attaches the tracker once per process; `record` is gmt_torch_allocator_action_in_pool. Returns 0 when attached (or
// attached before), else a reason in `why`: 1 the allocator is not PyTorch's native caching allocator (the
// cudaMallocAsync backend or a pluggable allocator: they call no trackers), 2 it has not been initialized yet,
// 3 PyTorch refused.
__attribute__((visibility("default"))) int gmt_torch_bridge_attach(void* record, char* why, size_t why_size) {
  if (g_attached) return 0;
  try {
    allocator::CUDAAllocator* current = allocator::get();
    if (current == nullptr) {
      say(why, why_size, "PyTorch has no CUDA allocator");
      return 2;
    }
    const std::string name = current->name();
    if (name != "native") {
      say(why, why_size, "PyTorch's CUDA allocator is '" + name + "', not its caching allocator");
      return 1;
    }
    if (!current->initialized()) {
      say(why, why_size, "PyTorch's caching allocator is not initialized yet");
      return 2;
    }
    g_record = reinterpret_cast<RecordFn>(record);
    allocator::attachAllocatorTraceTracker(&on_trace_entry);
    g_attached = true;
    return 0;
  } catch (const std::exception& error) {
    say(why, why_size, std::string("PyTorch refused the trace tracker: ") + error.what());
    return 3;
  }
}

}  // extern "C"
