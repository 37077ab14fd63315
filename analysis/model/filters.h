// Filters of `report` (--device, --since/--until, --pid, --min-size, --range): which events the analysis
// sees. The rule, written down in docs/analysis.md "Filters", is decided per allocation and followed by the
// events that release it, so the analysis never sees a free of an allocation it did not see:
//   - an allocation (Alloc, AllocFailed, VmmCreate) is analyzed when it passes every filter given: its
//     device, its time inside [since, until], its size at least min_size, and, for --range, made inside a
//     range of that name (ranges.h says what "inside" means);
//   - a free (Free, VmmRelease, VmmUnmap, and VmmMap of a physical handle) follows its allocation, and is
//     dropped after --until: what is live at --until is what the report calls live at the end;
//   - --pid compares with the trace's pid: a trace of another process matches nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>

#include "analysis/read/trace_file.h"

namespace gmt::analysis {

struct EventFilters {
  std::optional<int64_t> device;
  std::optional<int64_t> since_ns;  // relative to the process start
  std::optional<int64_t> until_ns;
  std::optional<int64_t> pid;
  std::optional<uint64_t> min_size;
  std::optional<std::string> range;  // the range's name (its message), in any domain
  // Names only (report --at, --since NAME: cli/snapshot_marks.h), for the words: the snapshots that gave until_ns
  // and since_ns.
  std::optional<std::string> until_snapshot;
  std::optional<std::string> since_snapshot;

  bool any() const { return device || since_ns || until_ns || pid || min_size || range; }
};

// The filters in effect, echoed by the renderers, and how much they kept.
struct FilterSummary {
  EventFilters filters;
  uint64_t allocations_matched = 0;  // allocation events analyzed (Alloc, AllocFailed, VmmCreate)
  uint64_t allocations_seen = 0;     // allocation events in the trace
  // One line for the user when the filters match no allocation ("--device 3 matches nothing: ..."); empty
  // when something matched or no filter was given.
  std::string nothing_matched;
};

// "--device 0 --since 1.5 --min-size 1048576": the filters as options, in a fixed order; "" for none.
std::string describe_filters(const EventFilters& filters);

// The absolute time of the process start: meta start_monotonic_ns, else the first event's time, else 0.
int64_t trace_origin(const TraceFile& trace);

class RangeTracker;

// Decides, event by event in the model's pass, whether the event is analyzed.
class EventFilter {
 public:
  // `ranges` answers --range (may be null when no --range is given).
  EventFilter(const TraceFile& trace, const EventFilters& filters, std::optional<int64_t> trace_pid,
              const RangeTracker* ranges);

  bool active() const { return active_; }
  // `imported`: an Alloc of memory opened from another process (MemoryKind::IpcImported), filtered like any
  // allocation but not one of the process's own, so not counted in the summary's figures.
  bool accept(int64_t kind, int64_t time_ns, int64_t thread_id, int64_t device, uint64_t address, int64_t size,
              uint64_t handle, bool imported = false);
  // After the pass: the summary, with the "matches nothing" line when nothing matched.
  // `allocations` is what the model counted, for the summary when no filter is given.
  FilterSummary finish(int64_t duration_ns, uint64_t allocations) const;

 private:
  bool accept_allocation(int64_t time_ns, int64_t thread_id, int64_t device, int64_t size, bool counted = true);

  EventFilters filters_;
  bool active_ = false;
  bool pid_matches_ = true;
  std::optional<int64_t> trace_pid_;
  int64_t since_abs_ = 0;  // absolute bounds of the time window
  int64_t until_abs_ = 0;
  const RangeTracker* ranges_ = nullptr;
  // Allocations (by address) and physical VMM handles left out and not yet released: their frees are too.
  std::unordered_set<uint64_t> left_out_addresses_;
  std::unordered_set<uint64_t> left_out_handles_;
  // For the "matches nothing" line: allocation events each filter would keep on its own.
  uint64_t seen_ = 0;
  uint64_t matched_ = 0;
  uint64_t device_ok_ = 0;
  uint64_t time_ok_ = 0;
  uint64_t size_ok_ = 0;
  uint64_t range_ok_ = 0;
  std::set<int64_t> devices_seen_;
  uint64_t largest_size_ = 0;
};

}  // namespace gmt::analysis
