// Breakdowns by thread, stream and allocating module (docs/analysis.md, "Breakdowns"), internal to
// analysis/. During the model's one pass each allocation gets an attribution slot (thread, stream, raw
// stack); the tracker then sees every change of live bytes (a LiveObserver in front of the analysis over
// time) and keeps, per slot, the bytes live at the latest total peak.
//
// Live at the peak costs O(1) amortized per change: a slot that changed since the last peak is marked; at
// a new peak only the marked slots copy their current bytes, so every copy is paid for by a change.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/model/live_memory.h"
#include "analysis/model/report.h"
#include "analysis/model/timeline.h"

namespace gmt::analysis {

// The library a module belongs to, by its file name ("libnccl.so.2" -> "NCCL"); empty when not known.
std::string module_label(const std::string& module_file_name);

// True for the CUDA libraries and the profiler itself (libcuda, libcudart, libcupti, libgpumemtrace):
// never the allocating module.
bool is_cuda_library(const std::string& module_file_name);

class BreakdownTracker : public LiveObserver {
 public:
  // Every change is passed on to `next` (the analysis over time) after it is counted here.
  explicit BreakdownTracker(LiveObserver* next);

  // An allocation (also one that never becomes live); returns its slot for LiveAllocation::attribution.
  uint32_t on_alloc(int64_t thread_id, int64_t stream, int64_t stack_id, uint64_t size);

  void on_live_change(const LiveAllocation& allocation, uint64_t address, bool added, int64_t time_ns) override;

  // After the pass: `live` holds what is still live at the end; `suppressed` says which raw stacks'
  // leaks were suppressed or cached by JAX/XLA's arena (they do not count as leaked here either).
  Breakdown finish(const std::unordered_map<uint64_t, LiveAllocation>& live, const StackLoadFn& load_stack,
                   const std::function<bool(int64_t stack_id)>& suppressed) const;

 private:
  struct Key {
    int64_t thread_id = 0;
    int64_t stream = 0;
    int64_t stack_id = 0;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& key) const {
      uint64_t h = static_cast<uint64_t>(key.thread_id) * 0x9E3779B97F4A7C15ull;
      h ^= static_cast<uint64_t>(key.stream) + 0x7F4A7C159E3779B9ull + (h << 6) + (h >> 2);
      h ^= static_cast<uint64_t>(key.stack_id) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
      return static_cast<size_t>(h);
    }
  };
  struct Slot {
    Key key;
    uint64_t allocations = 0;
    uint64_t allocated_bytes = 0;
    uint64_t live_bytes = 0;
    uint64_t peak_bytes = 0;  // live at the latest total peak
    bool changed = false;     // since the latest total peak
  };

  LiveObserver* next_;
  std::vector<Slot> slots_;  // slot 0: allocations without a slot (none in a normal pass)
  std::unordered_map<Key, uint32_t, KeyHash> slot_ids_;
  std::vector<uint32_t> changed_;
  uint64_t total_ = 0;
  uint64_t peak_ = 0;
  uint32_t last_slot_ = 0;  // most allocations repeat the previous key: skip the hash lookup
};

}  // namespace gmt::analysis
