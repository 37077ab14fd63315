#include "analysis/model/growth.h"

#include <fmt/core.h>

#include <algorithm>
#include <unordered_map>

namespace gmt::analysis {
namespace {

// Window of an absolute time in [t0, t0 + span): floor((t - t0) * windows / span), in 128 bits.
size_t window_of(int64_t t0, uint64_t span, size_t windows, int64_t t) {
  if (t <= t0) return 0;
  const unsigned __int128 offset = static_cast<uint64_t>(t) - static_cast<uint64_t>(t0);
  const auto window = static_cast<size_t>(offset * windows / span);
  return std::min(window, windows - 1);
}

// First nanosecond of window i: t0 + ceil(i * span / windows).
int64_t window_start(int64_t t0, uint64_t span, size_t windows, size_t i) {
  const unsigned __int128 scaled = static_cast<unsigned __int128>(i) * span + windows - 1;
  return static_cast<int64_t>(static_cast<uint64_t>(t0) + static_cast<uint64_t>(scaled / windows));
}

}  // namespace

std::map<int64_t, WindowLows> window_lows(const ChangeLog& log, int64_t t0, int64_t t1, size_t windows) {
  struct DeviceWindows {
    WindowLows lows;
    uint64_t level = 0;
    size_t next = 0;  // the first window whose carried-in level is not yet written
  };
  std::map<int64_t, DeviceWindows> devices;
  const uint64_t span = static_cast<uint64_t>(t1) - static_cast<uint64_t>(t0) + 1;
  // Windows from `state.next` up to `window` start at the level carried in (no change of this device between
  // their start and `position`).
  auto carry = [&](DeviceWindows& state, size_t window, uint64_t position) {
    for (; state.next <= window && state.next < windows; ++state.next) {
      state.lows.lows[state.next] = state.level;
      state.lows.positions[state.next] = position;
      state.lows.times[state.next] = window_start(t0, span, windows, state.next);
    }
  };

  const auto& changes = log.changes();
  uint64_t position = 0;
  for (; position < changes.size(); ++position) {
    const LiveChange& change = changes[position];
    if (change.time_ns > t1) break;  // after the last allocation: shutdown
    const int64_t device = log.slots()[change.slot()].device;
    auto [it, inserted] = devices.try_emplace(device);
    DeviceWindows& state = it->second;
    if (inserted) {
      state.lows.lows.assign(windows, 0);
      state.lows.positions.assign(windows, 0);
      state.lows.times.assign(windows, 0);
    }
    const size_t window = window_of(t0, span, windows, change.time_ns);
    carry(state, window, position);
    state.level = change.added() ? state.level + change.size() : state.level - change.size();
    if (state.level < state.lows.lows[window]) {
      state.lows.lows[window] = state.level;
      state.lows.positions[window] = position + 1;
      state.lows.times[window] = change.time_ns;
    }
  }
  std::map<int64_t, WindowLows> result;
  for (auto& [device, state] : devices) {
    carry(state, windows - 1, position);
    result.emplace(device, std::move(state.lows));
  }
  return result;
}

namespace {

struct LineFit {
  double slope_per_window = 0;
  uint64_t rising_steps = 0;
  uint64_t falling_steps = 0;
  uint64_t steps = 0;
};

// Least squares through lows[first..n-1] against the window index, and the rises and falls between them.
LineFit fit_line(const std::vector<uint64_t>& lows, size_t first) {
  LineFit fit;
  const size_t n = lows.size();
  const double points = static_cast<double>(n - first);
  double mean_x = 0;
  double mean_y = 0;
  for (size_t i = first; i < n; ++i) {
    mean_x += static_cast<double>(i);
    mean_y += static_cast<double>(lows[i]);
  }
  mean_x /= points;
  mean_y /= points;
  double sxx = 0;
  double sxy = 0;
  for (size_t i = first; i < n; ++i) {
    const double dx = static_cast<double>(i) - mean_x;
    sxx += dx * dx;
    sxy += dx * (static_cast<double>(lows[i]) - mean_y);
  }
  fit.slope_per_window = sxx > 0 ? sxy / sxx : 0;
  fit.steps = n - 1 - first;
  for (size_t i = first; i + 1 < n; ++i) {
    if (lows[i + 1] > lows[i]) ++fit.rising_steps;
    if (lows[i + 1] < lows[i]) ++fit.falling_steps;
  }
  return fit;
}

// The late-start rule (docs/analysis.md): a leak that began after a long steady run rises in too few of all
// the windows for the main rule. The earliest suffix of at least kMinLateWindows windows whose low watermark
// rose at least 3 times, in at least a quarter of its steps, and never fell, by at least the threshold, is
// growth since its first rise. Returns that window, or 0 when there is none.
size_t late_growth_start(const std::vector<uint64_t>& lows, uint64_t threshold_bytes) {
  const size_t n = lows.size();
  for (size_t first = 2; first + kMinLateWindows <= n; ++first) {
    LineFit fit = fit_line(lows, first);
    if (fit.falling_steps != 0 || fit.rising_steps < 3 || fit.rising_steps * 4 < fit.steps) continue;
    if (lows[n - 1] - lows[first] < threshold_bytes) continue;
    while (lows[first + 1] == lows[first]) ++first;  // since the first rise
    return first;
  }
  return 0;
}

}  // namespace

GrowthDevice evaluate_growth(int64_t device, const std::vector<uint64_t>& lows, double window_s, uint64_t peak_bytes) {
  GrowthDevice verdict;
  verdict.device = device;
  verdict.low_watermarks = lows;
  verdict.threshold_bytes = std::max(kMinGrowthBytes, peak_bytes / kGrowthPeakFraction);
  if (lows.size() < 3 || window_s <= 0) return verdict;  // fewer than two analyzed windows: no line

  // Windows 1..n-1 (0 is the warm-up); x in windows, so the slope is bytes per window.
  const size_t n = lows.size();
  LineFit fit = fit_line(lows, 1);
  verdict.slope_bytes_per_s = fit.slope_per_window / window_s;
  verdict.fitted_rise_bytes = fit.slope_per_window * static_cast<double>(n - 2);
  verdict.steps = fit.steps;
  verdict.rising_steps = fit.rising_steps;
  verdict.falling_steps = fit.falling_steps;
  verdict.growing = fit.slope_per_window > 0 &&
                    rises_steadily(verdict.rising_steps, verdict.falling_steps, verdict.steps) &&
                    verdict.fitted_rise_bytes >= static_cast<double>(verdict.threshold_bytes);
  if (verdict.growing) return verdict;
  if (size_t first = late_growth_start(lows, verdict.threshold_bytes); first != 0) {
    LineFit late = fit_line(lows, first);
    verdict.growing = true;
    verdict.first_window = first;
    verdict.slope_bytes_per_s = late.slope_per_window / window_s;
    verdict.fitted_rise_bytes = late.slope_per_window * static_cast<double>(n - 1 - first);
  }
  return verdict;
}

Growth analyze_growth(const ChangeLog& log, const std::map<int64_t, uint64_t>& device_peaks, int64_t origin,
                      std::vector<std::pair<SnapshotRequest, SnapshotRequest>>& moments) {
  Growth growth;
  const auto& changes = log.changes();
  // The analyzed interval: first to last allocation.
  auto first = std::find_if(changes.begin(), changes.end(), [](const LiveChange& c) { return c.added(); });
  if (first == changes.end()) {
    growth.reason = "nothing was allocated";
    return growth;
  }
  auto last = std::find_if(changes.rbegin(), changes.rend(), [](const LiveChange& c) { return c.added(); });
  const int64_t t0 = first->time_ns;
  const int64_t t1 = last->time_ns;
  // Changes up to the last allocation (the log is in time order).
  const uint64_t in_range =
      static_cast<uint64_t>(std::upper_bound(changes.begin(), changes.end(), t1,
                                             [](int64_t t, const LiveChange& c) { return t < c.time_ns; }) -
                            changes.begin());
  growth.start_ns = relative_to(origin, t0);
  growth.end_ns = relative_to(origin, t1);

  const uint64_t allocations_and_frees = log.whole_changes_before(in_range);  // not parts of large changes
  const uint64_t needed = kMinGrowthWindows * kChangesPerWindow;
  if (allocations_and_frees < needed) {
    growth.reason =
        fmt::format("too few allocations and frees to analyze growth: {} up to the last allocation, at least {} needed",
                    allocations_and_frees, needed);
    return growth;
  }
  const uint64_t span = static_cast<uint64_t>(t1) - static_cast<uint64_t>(t0) + 1;
  const size_t windows =
      static_cast<size_t>(std::min<uint64_t>(kGrowthWindows, allocations_and_frees / kChangesPerWindow));
  if (span < windows) {
    growth.reason = fmt::format("the allocations span only {} ns: too short to cut into time windows", span);
    return growth;
  }
  growth.analyzed = true;
  growth.windows = windows;
  const double window_ns = static_cast<double>(span) / static_cast<double>(windows);
  growth.window_ns = static_cast<int64_t>(window_ns + 0.5);

  for (const auto& [device, lows] : window_lows(log, t0, t1, windows)) {
    auto peak = device_peaks.find(device);
    GrowthDevice verdict =
        evaluate_growth(device, lows.lows, window_ns / 1e9, peak == device_peaks.end() ? 0 : peak->second);
    if (verdict.growing) {
      GrowthFinding finding;
      finding.device = device;
      finding.rate_bytes_per_s = verdict.slope_bytes_per_s;
      const size_t first = verdict.first_window;
      finding.start_low_bytes = lows.lows[first];
      finding.end_low_bytes = lows.lows[windows - 1];
      finding.start_time_ns = relative_to(origin, lows.times[first]);
      finding.end_time_ns = relative_to(origin, lows.times[windows - 1]);
      finding.late_start = first > 1;
      growth.findings.push_back(std::move(finding));
      moments.emplace_back(SnapshotRequest{lows.positions[first], device},
                           SnapshotRequest{lows.positions[windows - 1], device});
    }
    growth.devices.push_back(std::move(verdict));
  }
  return growth;
}

void attach_growth_stacks(GrowthFinding& finding, const std::vector<GroupBytes>& start,
                          const std::vector<GroupBytes>& end, size_t top, StackGroups& groups) {
  std::unordered_map<uint32_t, uint64_t> start_bytes;
  for (const GroupBytes& entry : start) start_bytes[entry.group] = entry.bytes;
  struct Grown {
    const GroupBytes* entry;
    uint64_t before;
    uint64_t growth;
  };
  std::vector<Grown> grown;
  for (const GroupBytes& entry : end) {
    auto before = start_bytes.find(entry.group);
    const uint64_t was = before == start_bytes.end() ? 0 : before->second;
    if (entry.bytes > was) grown.push_back(Grown{&entry, was, entry.bytes - was});
  }
  finding.growing_stack_groups = grown.size();
  const size_t keep = std::min(top, grown.size());
  std::partial_sort(grown.begin(), grown.begin() + static_cast<std::ptrdiff_t>(keep), grown.end(),
                    [](const Grown& a, const Grown& b) {
                      if (a.growth != b.growth) return a.growth > b.growth;
                      return a.entry->stack_ids.front() < b.entry->stack_ids.front();
                    });
  for (size_t i = 0; i < keep; ++i) {
    const GroupBytes& entry = *grown[i].entry;
    finding.stacks.push_back(
        GrowthStack{groups.load(entry.stack_ids.front()), entry.stack_ids, grown[i].before, entry.bytes});
  }
}

}  // namespace gmt::analysis
