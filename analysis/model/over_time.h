// The analysis over time, internal to analysis/: listens to every change of live bytes during the model's
// one pass over the events (a LiveObserver) and, once the pass is done, fills the Report's timeline, peaks
// per device with their stacks, growth, fragmentation, the failures' forensics (the pools: pools.h).
//
// Linear: during the pass each change is appended to a compact log (timeline.h) and, for device memory,
// kept in an address-ordered map per device (fragmentation.h, O(log n)); afterwards the log is bucketed
// once and replayed once up to the latest moment whose stacks are wanted (the peaks, the growth windows'
// low-watermark moments, the failures).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "analysis/model/fragmentation.h"
#include "analysis/model/live_memory.h"
#include "analysis/model/options.h"
#include "analysis/model/report.h"
#include "analysis/model/timeline.h"
#include "analysis/read/trace_file.h"

namespace gmt::analysis {

class OverTimeTracker : public LiveObserver {
 public:
  void on_live_change(const LiveAllocation& allocation, uint64_t address, bool added, int64_t time_ns) override;

  // A failed allocation at this moment of the pass; `index` is its place in Report::failures.
  void on_failure(size_t index, int64_t device, int64_t time_ns);

  // After the pass (failures and trace info already in the report): fills the rest. `origin` is the
  // absolute time of the process start.
  void finish(const TraceFile& trace, Report& report, int64_t origin, const AnalyzeOptions& options,
              const StackLoadFn& load_stack, const StackKeyFn& stack_key);

 private:
  struct DeviceState {
    uint64_t level = 0;
    uint64_t peak = 0;
    int64_t peak_time = 0;  // absolute
    uint64_t peak_position = 0;
    std::optional<FragmentationStats> fragmentation_at_peak;  // time absolute until finish()
  };
  struct FailureMoment {
    size_t index = 0;
    uint64_t position = 0;
    int64_t device = -1;
    std::optional<FragmentationStats> fragmentation;  // time absolute until finish()
  };

  DeviceState& device_state(int64_t device);

  ChangeLog log_;
  std::map<int64_t, DeviceState> devices_;
  std::map<int64_t, GapTracker> gaps_;  // device memory only, per device
  std::vector<FailureMoment> failures_;
  // The last device looked up: most traces use one device, so the map is rarely searched.
  int64_t cached_device_ = 0;
  DeviceState* cached_state_ = nullptr;
};

// Failures whose holders (top stacks) are worked out; the rest keep their label and gap but no stacks.
inline constexpr size_t kMaxFailureSnapshots = 1000;

}  // namespace gmt::analysis
