// Single allocations for the Perfetto trace's slices and the HTML page's zoomed-in views, bounded: the run is cut into
// equal windows by allocation time, and each window keeps its largest allocations (ties: the earliest), so that every
// stretch of the run has allocations to show when zoomed in and the output's size does not follow the event count.
// What is left out is counted and summed per device. Lives of level Cuda and Block only (lifetimes.h): a heap's
// segments and the memory behind them are the allocator's, shown by the segment map.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <queue>
#include <unordered_map>
#include <vector>

#include "analysis/model/filters.h"
#include "analysis/model/lifetimes.h"
#include "analysis/read/stacks.h"
#include "analysis/read/trace_file.h"

namespace gmt::analysis {

struct SliceLimits {
  size_t max_slices = 20'000;  // allocations kept in all
  size_t windows = 200;        // each keeps max_slices / windows
};

struct SummedLives {
  uint64_t lives = 0;
  uint64_t bytes = 0;
};

struct AllocationSlices {
  std::vector<Lifetime> shown;  // by allocation time; free_ns kStillLive for those live at the end
  int64_t window_ns = 0;
  size_t per_window = 0;
  uint64_t lives = 0;                        // every life of level Cuda or Block the filters kept
  std::map<int64_t, SummedLives> not_shown;  // by device
  int64_t duration_ns = 0;
  std::unordered_map<int64_t, Stack> stacks;  // of the shown lives
};

// The sink behind collect_allocation_slices, for a pass that feeds several sinks (viewer_data.h).
class SliceCollector : public LifetimeSink {
 public:
  SliceCollector(AllocationSlices& slices, int64_t duration_ns, const SliceLimits& limits);
  void on_begin(const Lifetime& life) override;
  void on_end(const Lifetime& life) override;
  // After the walk: the lives still live at its end are offered, the choice sorted and the stacks loaded.
  void finish(const LifetimeWalk& walk, const TraceFile& trace);

 private:
  struct KeptLast {
    bool operator()(const Lifetime& a, const Lifetime& b) const;
  };
  void offer(const Lifetime& life);
  void drop(const Lifetime& life);

  AllocationSlices& slices_;
  size_t per_window_ = 1;
  int64_t window_ns_ = 1;
  std::vector<std::priority_queue<Lifetime, std::vector<Lifetime>, KeptLast>> kept_;
};

// `duration_ns`: the run's length (the Report's), which the windows divide; lives past it fall in the last window.
AllocationSlices collect_allocation_slices(const TraceFile& trace, const EventFilters& filters, int64_t duration_ns,
                                           const SliceLimits& limits = {});

}  // namespace gmt::analysis
