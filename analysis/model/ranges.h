// Memory by NVTX range, internal to analysis/ (docs/analysis.md "Memory by NVTX range" and "Growth per
// repetition"; keep both in step). Reads the trace's `ranges` table once, then follows the model's pass over
// the events in time order: advance() opens and closes ranges up to each event's time, on_alloc()/on_free()
// attribute allocations, and finish() fills Report::ranges and Report::range_spans.
//
// Where an allocation belongs (one bucket each, so the buckets add up to the totals):
//   1. the innermost range of the allocating thread: the latest started among the push/pop ranges open on
//      it and the start/end ranges open that it started;
//   2. else the latest started start/end range open in the process, started by another thread: start/end
//      ranges are not tied to a thread (they may end on another one) and often mark a phase of the whole
//      process, but the thread's own ranges say more about its allocations;
//   3. else the `none` bucket.
// "Inside a range" (for growth per repetition and for --range) is wider: every push/pop range open on the
// allocating thread, at any depth, and every start/end range open in the process.
// A range is open from start_ns to end_ns inclusive (an event at the very end time is still inside).
// VMM physical memory is not attributed to ranges (only Alloc/Free events are).
#pragma once

#include <cstdint>
#include <map>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/model/filters.h"
#include "analysis/model/options.h"
#include "analysis/model/report.h"
#include "analysis/model/timeline.h"
#include "analysis/read/trace_file.h"

namespace gmt::analysis {

// A range repeated this often (repetitions that ended) is checked for growth per repetition.
inline constexpr uint64_t kMinRangeRepetitions = 3;
inline constexpr uint64_t kMinRangeGrowthBytes = uint64_t{1} << 20;
inline constexpr uint64_t kRangeGrowthPeakFraction = 20;  // 1/20 = 5% of the highest live bytes at an end
inline constexpr size_t kMaxRangeSeries = 1000;           // live_bytes_at_end values kept in the Report

// The rule of docs/analysis.md on one range's live bytes at the end of each repetition (the first is the
// warm-up): growing when the least-squares slope over the rest is positive, the value rose in more than
// half of the steps, and the fitted rise is at least max(1 MiB, 5% of the highest value).
RangeGrowth evaluate_range_growth(std::vector<uint64_t> live_at_end);

class RangeTracker {
 public:
  RangeTracker(const TraceFile& trace, const EventFilters& filters, std::optional<int64_t> trace_pid);

  bool has_table() const { return has_table_; }
  bool has_ranges() const { return !occurrences_.empty(); }
  bool has_named_range() const { return named_exists_; }  // a range named --range exists

  // Before each event, in time order: ranges that started at or before `time_ns` are open, those that
  // ended before it are closed.
  void advance(int64_t time_ns) {
    if (!occurrences_.empty()) advance_slow(time_ns);
  }
  // Inside a range named --range, on this thread (after advance to the event's time).
  bool inside_named(int64_t thread_id) const;

  void on_alloc(int64_t thread_id, uint64_t address, uint64_t size, int64_t stack_id, bool counted);
  void on_free(uint64_t address);

  void finish(Report& report, int64_t origin, const AnalyzeOptions& options, const StackLoadFn& load_stack,
              const StackKeyFn& stack_key);

 private:
  struct Occurrence {
    uint32_t key = 0;
    int64_t id = 0;
    int64_t thread_id = 0;
    int64_t start_ns = 0;  // absolute
    int64_t end_ns = 0;    // absolute; kOpen when never closed
    int64_t depth = 0;
  };
  struct KeyState {
    RangeStats stats;
    uint64_t live_inside = 0;  // live bytes of allocations made inside an occurrence, any depth
    uint64_t ends_total = 0;   // occurrences with an end, to know the last one
    uint64_t ends_seen = 0;
    bool repeated = false;  // ends_total >= kMinRangeRepetitions: tracked per stack
    std::vector<uint64_t> live_at_end;
    std::unordered_map<int64_t, uint64_t> live_by_stack;   // repeated ranges only
    std::unordered_map<int64_t, uint64_t> first_snapshot;  // at the end of repetition 1 (after the warm-up)
    std::unordered_map<int64_t, uint64_t> last_snapshot;
  };
  struct Allocation {
    uint64_t size = 0;
    int64_t stack_id = 0;
    uint32_t bucket = 0;
    bool counted = false;
    std::vector<uint32_t> inside;  // keys of the ranges it was made inside
  };
  static constexpr int64_t kOpen = INT64_MAX;

  void load(const TraceFile& trace, const EventFilters& filters);
  void advance_slow(int64_t time_ns);
  void open(uint32_t index);
  void close(uint32_t index);
  void forget(const Allocation& allocation);
  uint32_t key_of(const std::string& domain, const std::string& name);

  bool has_table_ = false;
  bool named_exists_ = false;
  std::vector<Occurrence> occurrences_;                                  // by start, then id
  std::vector<KeyState> keys_;                                           // keys_[0] is `none`
  std::map<std::pair<std::string, std::string>, uint32_t> key_by_name_;  // (domain, name)
  std::vector<bool> named_;                                              // per key: its name is --range
  size_t next_ = 0;
  std::unordered_map<int64_t, std::vector<uint32_t>> open_on_thread_;  // push/pop, by thread
  std::vector<uint32_t> open_start_end_;
  std::vector<uint32_t> open_all_;
  using End = std::pair<int64_t, uint32_t>;
  std::priority_queue<End, std::vector<End>, std::greater<End>> ends_;
  std::unordered_map<uint64_t, Allocation> live_;
  uint64_t live_bytes_ = 0;  // counted kinds, Alloc/Free events analyzed
};

}  // namespace gmt::analysis
