// The aggregate trace's in-memory state (recorder/aggregator.h): the live set, the levels whose peaks decide what is
// kept, the per-window summaries and the NVTX range summaries. Writer thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "recorder/event.h"

namespace gmt::recorder {

// An allocation is found again by its address, its capture path (a --verify cross-check is refused with
// --aggregate, but a framework's blocks and CUDA memory may share addresses) and its level.
struct AggregateLiveKey {
  uint64_t address;
  uint8_t source;
  uint8_t level;  // schema::aggregate::kLevelCuda / kLevelBlock / kLevelSegment
  bool operator==(const AggregateLiveKey& o) const {
    return address == o.address && source == o.source && level == o.level;
  }
};
struct AggregateLiveKeyHash {
  size_t operator()(const AggregateLiveKey& k) const {
    return std::hash<uint64_t>()(k.address ^ (uint64_t{k.source} << 56) ^ (uint64_t{k.level} << 48));
  }
};

inline constexpr int kMaxTrackersPerAllocation = 6;
inline constexpr int kMaxRangesPerAllocation = 4;

struct AggregateLive {
  EventRecord alloc;
  uint64_t id = 0;
  bool written = false;  // its Alloc row is in the trace
  uint8_t trackers = 0;
  uint8_t contributes = 0;  // bit i: trackers[i]'s level includes this allocation (else it only watches its peak)
  uint8_t ranges = 0;
  uint32_t tracker[kMaxTrackersPerAllocation] = {};
  uint32_t range[kMaxRangesPerAllocation] = {};  // AggregateRanges key indices it was allocated inside
};

// An allocation freed, kept because it was live at a moment the report looks at.
struct AggregateKept {
  EventRecord alloc;
  EventRecord free;
  uint64_t free_id = 0;  // 0: no Free row (an allocation replaced by another at its address)
  bool alloc_written = false;
  bool free_written = false;
  bool permanent = false;  // live at a kept failure
  uint32_t refs = 0;       // trackers whose current peak it was live at
};

// One level whose peak the report computes (the counted kinds together, per kind, per device, per pool, a heap's
// blocks per device, the app level per device): its current value, its highest so far and the id of the event
// that first reached it, and the allocations freed since that were live then (kept while it stays the peak).
struct AggregateTracker {
  int64_t level = 0;
  int64_t peak = 0;
  uint64_t peak_id = 0;  // 0: no peak yet
  std::vector<uint64_t> kept;
  int level_table = -1;  // aggregate_levels.level it is written under, -1: none
  int16_t device = -1;
};

// Per-window summaries, merged pairwise when the run outgrows kMaxWindows windows.
struct AggregateWindowKey {
  uint32_t window;
  uint32_t stack_id;
  uint8_t level;
  uint8_t memory_kind;
  int16_t device;
  bool operator==(const AggregateWindowKey& o) const {
    return window == o.window && stack_id == o.stack_id && level == o.level && memory_kind == o.memory_kind &&
           device == o.device;
  }
};
struct AggregateWindowKeyHash {
  size_t operator()(const AggregateWindowKey& k) const {
    return std::hash<uint64_t>()((uint64_t{k.window} << 32 | k.stack_id) * 0x9E3779B97F4A7C15ull ^
                                 (uint64_t{k.level} << 24 | uint64_t{k.memory_kind} << 16 | uint16_t(k.device)));
  }
};
struct AggregateWindowCell {
  uint64_t allocs = 0, alloc_bytes = 0, frees = 0, free_bytes = 0;
  bool dirty = false;
};
struct AggregateLevelCell {
  int64_t low = 0, high = 0, end = 0;
  bool dirty = false;
};
struct AggregateRangeCell {
  uint64_t repetitions = 0, total_ns = 0, max_ns = 0;
  bool dirty = false;
};

struct AggregateWindows {
  std::unordered_map<AggregateWindowKey, AggregateWindowCell, AggregateWindowKeyHash> cells;
  // (window, level, device) and (window, domain, name) packed into 64 bits.
  std::unordered_map<uint64_t, AggregateLevelCell> levels;
  std::unordered_map<uint64_t, AggregateRangeCell> ranges;
  static uint64_t level_key(uint32_t window, int level, int16_t device) {
    return uint64_t{window} << 32 | uint64_t(uint8_t(level)) << 16 | uint16_t(device);
  }
  AggregateWindowCell& cell(const AggregateWindowKey& key) {
    AggregateWindowCell& c = cells[key];
    c.dirty = true;
    return c;
  }
  // A level changed to `value` in `window` (it was `before` just before the change).
  void level_changed(uint32_t window, int level, int16_t device, int64_t before, int64_t value);
  // Halves the number of windows: window w becomes w / 2 (sums add; lows, highs take the extreme; the end is the
  // later window's). Every row is marked to be written again.
  void merge_pairs();
};

// NVTX ranges: open ones by row id, each name's summary, and which ranges each thread has open (an allocation is
// inside every push/pop range open on its thread and every start/end range open in the process).
struct AggregateRanges {
  struct Open {
    uint64_t start_ns;
    uint32_t key;
    uint32_t thread_id;
    bool push_pop;
  };
  struct Name {
    uint32_t domain_id = 0, name_id = 0;
    int64_t live_inside = 0;                           // bytes allocated inside it (any repetition) still live
    uint64_t ends = 0;                                 // repetitions ended
    uint64_t stride = 1;                               // every stride-th end is kept in `series`
    std::vector<std::pair<uint64_t, int64_t>> series;  // (end_ns, live_inside) at kept ends; index * stride = end
    size_t written = 0;                                // series[0, written) are in the trace
    bool rewrite = false;                              // decimated since written: the name's rows are written again
  };
  std::unordered_map<uint64_t, Open> open;                             // ranges.id -> its begin
  std::unordered_map<uint64_t, uint64_t> start_end_by_app;             // nvtxRangeId_t -> ranges.id
  std::unordered_map<uint32_t, std::vector<uint64_t>> open_on_thread;  // push/pop ranges.ids, innermost last
  std::vector<uint64_t> open_start_end;
  std::vector<Name> names;
  std::unordered_map<uint64_t, uint32_t> name_index;  // domain_id << 32 | name_id -> names index
  std::vector<uint32_t> dirty_names;

  uint32_t key_of(uint32_t domain_id, uint32_t name_id);
  // The names an allocation on `thread_id` is inside, at most kMaxRangesPerAllocation (innermost first).
  uint8_t inside(uint32_t thread_id, uint32_t* keys) const;
  void end(uint32_t key, uint64_t end_ns);
};

}  // namespace gmt::recorder
