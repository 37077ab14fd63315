// Live memory over time, internal to analysis/: the change log that the model's one pass over the events
// fills, the timeline buckets built from it, and per-stack live bytes at chosen moments (a replay of the log
// up to each moment). Everything here is linear in the number of changes: the log is replayed at most once.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/model/report.h"

namespace gmt::analysis {

// One change of live bytes: an allocation became live or stopped being live. 16 bytes each (a trace of 50
// million events keeps at most 800 MB of them): the size, the slot and the direction share one word. A size
// above kMaxChunk (1 GiB) is logged as several changes at the same time, all but the first `continued`: they
// move bytes but count no allocation, and replaying them reaches the same levels (positions are only ever
// taken between appends, so never inside such a run).
struct LiveChange {
  static constexpr uint64_t kMaxChunk = (uint64_t{1} << 30) - 1;

  int64_t time_ns = 0;  // absolute (CLOCK_MONOTONIC of the event)
  uint64_t bits = 0;    // slot << 32 | size << 2 | continued << 1 | added

  uint64_t size() const { return (bits >> 2) & kMaxChunk; }
  uint32_t slot() const { return static_cast<uint32_t>(bits >> 32); }  // ChangeLog::slots() index
  bool added() const { return (bits & 1) != 0; }
  bool continued() const { return (bits & 2) != 0; }  // a further part of the change before it
};
static_assert(sizeof(LiveChange) == 16);

// What a change is about, apart from its size: one slot per distinct (stack, device, kind).
struct ChangeSlot {
  int64_t stack_id = 0;
  int64_t device = -1;
  schema::MemoryKind memory_kind = schema::MemoryKind::None;
};

class ChangeLog {
 public:
  uint32_t slot_for(int64_t stack_id, int64_t device, schema::MemoryKind kind);
  void append(int64_t time_ns, uint64_t size, uint32_t slot, bool added) {
    uint64_t continued = 0;
    do {
      const uint64_t part = std::min(size, LiveChange::kMaxChunk);
      changes_.push_back(LiveChange{time_ns, uint64_t{slot} << 32 | part << 2 | continued | (added ? 1u : 0u)});
      size -= part;
      continued = 2;
    } while (size > 0);
  }
  // Changes in [0, position) that are whole changes (not continued parts): allocations and frees.
  uint64_t whole_changes_before(uint64_t position) const;
  // A position is a number of changes applied: 0 is before the first change, size() after the last.
  uint64_t position() const { return changes_.size(); }
  // The position after every change at or before `time_ns` (absolute): changes are appended in time order.
  uint64_t position_after(int64_t time_ns) const {
    auto after = std::upper_bound(changes_.begin(), changes_.end(), time_ns,
                                  [](int64_t t, const LiveChange& change) { return t < change.time_ns; });
    return static_cast<uint64_t>(after - changes_.begin());
  }
  const std::vector<LiveChange>& changes() const { return changes_; }
  const std::vector<ChangeSlot>& slots() const { return slots_; }

 private:
  struct SlotKey {
    int64_t stack_id;
    int64_t device;
    schema::MemoryKind kind;
    bool operator==(const SlotKey&) const = default;
  };
  struct SlotHash {
    size_t operator()(const SlotKey& key) const {
      uint64_t h = static_cast<uint64_t>(key.stack_id) * 0x9E3779B97F4A7C15ull;
      h ^= (static_cast<uint64_t>(key.device) + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2));
      h ^= static_cast<uint64_t>(key.kind) * 0xC2B2AE3D27D4EB4Full;
      return static_cast<size_t>(h);
    }
  };
  std::vector<LiveChange> changes_;
  std::vector<ChangeSlot> slots_;
  std::unordered_map<SlotKey, uint32_t, SlotHash> slot_ids_;
};

// Wrapping subtraction from the origin, as the model does for every relative time.
inline int64_t relative_to(int64_t origin, int64_t absolute) {
  return static_cast<int64_t>(static_cast<uint64_t>(absolute) - static_cast<uint64_t>(origin));
}

// Buckets of equal width from time 0 (the process start) to `end_ns` (relative; extended to the last change
// when a change comes later), at most kMaxTimelineBuckets. Changes before the origin count in the first
// bucket. Empty when the log is.
Timeline build_timeline(const ChangeLog& log, int64_t origin, int64_t end_ns);

// Stack grouping as the leaks use it: stacks that resolve to the same source lines are one group.
using StackLoadFn = std::function<const Stack&(int64_t stack_id)>;
using StackKeyFn = std::function<std::string(const Stack&)>;

class StackGroups {
 public:
  StackGroups(StackLoadFn load, StackKeyFn key) : load_(std::move(load)), key_(std::move(key)) {}
  uint32_t group_of(int64_t stack_id);
  size_t size() const { return keys_.size(); }
  const Stack& load(int64_t stack_id) { return load_(stack_id); }

 private:
  StackLoadFn load_;
  StackKeyFn key_;
  std::unordered_map<int64_t, uint32_t> by_stack_;
  std::unordered_map<std::string, uint32_t> keys_;
};

// Bytes one group held on one device at one moment, before its frames are loaded.
struct GroupBytes {
  uint32_t group = 0;
  uint64_t bytes = 0;
  uint64_t count = 0;
  std::vector<int64_t> stack_ids;  // ascending; the first is the group's representative
};

// A moment to look at: `position` changes applied, stacks of `device` only.
struct SnapshotRequest {
  uint64_t position = 0;
  int64_t device = -1;
};

// Every group holding memory (bytes or allocations) on the requested device at each requested moment, in
// the order of the requests. One replay of the log up to the latest request; equal requests share a result.
std::vector<std::vector<GroupBytes>> snapshot_groups(const ChangeLog& log, const std::vector<SnapshotRequest>& requests,
                                                     StackGroups& groups);

// The largest `top` of `snapshot` (bytes, then count, then stack id), with frames loaded.
std::vector<StackBytes> top_stack_bytes(const std::vector<GroupBytes>& snapshot, size_t top, StackGroups& groups);

}  // namespace gmt::analysis
