#include "analysis/model/over_time.h"

#include <algorithm>
#include <charconv>

#include "analysis/model/growth.h"
#include "analysis/model/options.h"

namespace gmt::analysis {
namespace {

// The device's total memory for the growth projection: the largest device_total a failed allocation on it
// recorded, else meta device_total_bytes (one value for every device), else unknown.
std::optional<uint64_t> device_total(const TraceFile& trace, const std::vector<AllocFailure>& failures,
                                     int64_t device) {
  if (device < 0) return std::nullopt;  // host memory has no device total
  std::optional<uint64_t> total;
  for (const AllocFailure& failure : failures) {
    if (failure.device == device && failure.device_total && *failure.device_total > 0) {
      total = std::max(total.value_or(0), static_cast<uint64_t>(*failure.device_total));
    }
  }
  if (total) return total;
  auto text = trace.meta("device_total_bytes");
  if (!text) return std::nullopt;
  uint64_t value = 0;
  const char* end = text->data() + text->size();
  auto [ptr, ec] = std::from_chars(text->data(), end, value);
  if (ec != std::errc() || ptr != end || value == 0) return std::nullopt;
  return value;
}

FragmentationStats made_relative(FragmentationStats stats, int64_t origin) {
  stats.time_ns = relative_to(origin, stats.time_ns);
  return stats;
}

// The CUDA-level failed allocation behind a PyTorch OOM: the last one on its device at or before the OOM sample,
// at most kOomFailureWindowNs earlier (PyTorch frees its cache and retries before it raises: the last try).
void attach_cuda_failure(AllocatorOom& oom, const std::vector<AllocFailure>& failures) {
  const AllocFailure* match = nullptr;
  for (const AllocFailure& failure : failures) {
    if (failure.time_ns > oom.time_ns) break;  // failures are in time order
    if (failure.device == oom.device && oom.time_ns - failure.time_ns <= kOomFailureWindowNs) match = &failure;
  }
  if (!match) return;
  oom.cuda_failure_event_id = match->event_id;
  oom.cuda_failure_request_bytes = match->requested_bytes;
  oom.device_free_bytes = match->device_free;
  oom.device_total_bytes = match->device_total;
}

}  // namespace

OverTimeTracker::DeviceState& OverTimeTracker::device_state(int64_t device) {
  if (cached_state_ && cached_device_ == device) return *cached_state_;
  cached_device_ = device;
  cached_state_ = &devices_[device];  // std::map: references stay valid as devices are added
  return *cached_state_;
}

void OverTimeTracker::on_live_change(const LiveAllocation& allocation, uint64_t address, bool added, int64_t time_ns) {
  log_.append(time_ns, allocation.size, log_.slot_for(allocation.stack_id, allocation.device, allocation.memory_kind),
              added);
  if (allocation.memory_kind == schema::MemoryKind::Device && address != 0) {
    GapTracker& gaps = gaps_[allocation.device];
    if (added) {
      gaps.insert(address, allocation.size);
    } else {
      gaps.erase(address);
    }
  }
  DeviceState& state = device_state(allocation.device);
  if (!added) {
    state.level -= allocation.size;
    return;
  }
  state.level += allocation.size;
  if (state.level > state.peak) {
    // A new peak costs O(1): the gap tracker keeps its numbers current.
    state.peak = state.level;
    state.peak_time = time_ns;
    state.peak_position = log_.position();
    auto gaps = gaps_.find(allocation.device);
    if (gaps != gaps_.end() && !gaps->second.empty()) {
      state.fragmentation_at_peak = gaps->second.stats(time_ns);
    } else {
      state.fragmentation_at_peak.reset();
    }
  }
}

void OverTimeTracker::on_failure(size_t index, int64_t device, int64_t time_ns) {
  FailureMoment moment{index, log_.position(), device, std::nullopt};
  auto gaps = gaps_.find(device);
  if (gaps != gaps_.end()) moment.fragmentation = gaps->second.stats(time_ns);
  failures_.push_back(moment);
}

void OverTimeTracker::finish(const TraceFile& trace, Report& report, int64_t origin, const AnalyzeOptions& options,
                             const StackLoadFn& load_stack, const StackKeyFn& stack_key) {
  auto relative = [origin](int64_t absolute) { return relative_to(origin, absolute); };
  report.timeline = build_timeline(log_, origin, report.trace.duration_ns);

  std::map<int64_t, uint64_t> device_peaks;
  for (const auto& [device, state] : devices_) device_peaks[device] = state.peak;
  std::vector<std::pair<SnapshotRequest, SnapshotRequest>> growth_moments;
  report.growth = analyze_growth(log_, device_peaks, origin, growth_moments);

  // Every moment whose stacks are wanted, answered by one replay of the log.
  std::vector<SnapshotRequest> requests;
  std::vector<int64_t> peak_devices;
  for (const auto& [device, state] : devices_) {
    if (state.peak > 0) peak_devices.push_back(device);
  }
  // Devices in order, host memory (-1) and other odd numbers after them.
  std::stable_partition(peak_devices.begin(), peak_devices.end(), [](int64_t device) { return device >= 0; });
  for (int64_t device : peak_devices) requests.push_back(SnapshotRequest{devices_.at(device).peak_position, device});
  const size_t growth_first = requests.size();
  for (const auto& [start, end] : growth_moments) {
    requests.push_back(start);
    requests.push_back(end);
  }
  // PyTorch's out-of-memory errors (allocator_stats.h): the CUDA-level picture at each, from the same replay.
  report.allocator_stats = read_allocator_stats(trace, relative);
  std::vector<AllocatorOom>* ooms = report.allocator_stats ? &report.allocator_stats->ooms : nullptr;
  const size_t ooms_first = requests.size();
  const size_t oom_snapshots = ooms ? std::min(ooms->size(), kMaxFailureSnapshots) : 0;
  for (size_t i = 0; i < oom_snapshots; ++i) {
    const int64_t absolute =
        static_cast<int64_t>(static_cast<uint64_t>(origin) + static_cast<uint64_t>((*ooms)[i].time_ns));
    requests.push_back(SnapshotRequest{log_.position_after(absolute), (*ooms)[i].device});
  }
  const size_t failures_first = requests.size();
  const size_t failure_snapshots = std::min(failures_.size(), kMaxFailureSnapshots);
  for (size_t i = 0; i < failure_snapshots; ++i) {
    requests.push_back(SnapshotRequest{failures_[i].position, failures_[i].device});
  }
  StackGroups groups(load_stack, stack_key);
  const auto snapshots = snapshot_groups(log_, requests, groups);

  for (size_t i = 0; i < peak_devices.size(); ++i) {
    const DeviceState& state = devices_.at(peak_devices[i]);
    report.peaks.push_back(DevicePeak{peak_devices[i], state.peak, relative(state.peak_time),
                                      top_stack_bytes(snapshots[i], options.top_stacks, groups), snapshots[i].size(),
                                      std::nullopt, 0});
  }
  for (size_t i = 0; i < report.growth.findings.size(); ++i) {
    GrowthFinding& finding = report.growth.findings[i];
    attach_growth_stacks(finding, snapshots[growth_first + 2 * i], snapshots[growth_first + 2 * i + 1],
                         options.top_stacks, groups);
    finding.device_total_bytes = device_total(trace, report.failures, finding.device);
    if (finding.device_total_bytes && finding.rate_bytes_per_s > 0) {
      const uint64_t total = *finding.device_total_bytes;
      const uint64_t headroom = total > finding.end_low_bytes ? total - finding.end_low_bytes : 0;
      finding.seconds_until_full = static_cast<double>(headroom) / finding.rate_bytes_per_s;
    }
  }

  for (auto& [device, gaps] : gaps_) {
    DeviceFragmentation fragmentation;
    fragmentation.device = device;
    const DeviceState& state = devices_.at(device);
    if (state.fragmentation_at_peak) fragmentation.at_peak = made_relative(*state.fragmentation_at_peak, origin);
    fragmentation.at_end = gaps.stats(report.trace.duration_ns);
    report.fragmentation.push_back(fragmentation);
  }

  for (size_t i = 0; i < failures_.size(); ++i) {
    AllocFailure& failure = report.failures[failures_[i].index];
    failure.label = failure_label(failure);
    if (failures_[i].fragmentation) failure.fragmentation = made_relative(*failures_[i].fragmentation, origin);
    if (i < failure_snapshots) {
      failure.top_stacks = top_stack_bytes(snapshots[failures_first + i], options.top_stacks, groups);
    }
  }

  if (ooms) {
    for (size_t i = 0; i < ooms->size(); ++i) {
      AllocatorOom& oom = (*ooms)[i];
      attach_cuda_failure(oom, report.failures);
      if (i >= oom_snapshots) continue;
      const auto& snapshot = snapshots[ooms_first + i];
      for (const GroupBytes& group : snapshot) oom.cuda_live_bytes += group.bytes;
      oom.top_stacks = top_stack_bytes(snapshot, options.top_stacks, groups);
      oom.stack_groups = snapshot.size();
    }
  }
}

}  // namespace gmt::analysis
