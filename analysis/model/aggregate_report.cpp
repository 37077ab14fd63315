#include "analysis/model/aggregate_report.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <memory>
#include <unordered_map>

#include "analysis/format.h"
#include "analysis/model/growth.h"
#include "analysis/model/ranges.h"
#include "analysis/model/timeline.h"
#include "analysis/read/stacks.h"
#include "schema/aggregate_schema.h"

namespace gmt::analysis {
namespace {

namespace agg = schema::aggregate;

// Each device's live bytes per window at one level: lowest, highest, last; a window without a row carries the last.
struct DeviceWindows {
  std::vector<int64_t> low, high, end;
};

std::map<int64_t, DeviceWindows> device_levels(const AggregateTables& t, int level, size_t windows) {
  std::map<int64_t, DeviceWindows> devices;
  for (const AggregateLevelRow& row : t.levels) {
    if (row.level != level || row.window < 0 || static_cast<size_t>(row.window) >= windows) continue;
    DeviceWindows& d = devices[row.device];
    if (d.low.empty()) {
      d.low.assign(windows, -1);
      d.high.assign(windows, -1);
      d.end.assign(windows, -1);
    }
    d.low[row.window] = row.low_bytes;
    d.high[row.window] = row.high_bytes;
    d.end[row.window] = row.end_bytes;
  }
  for (auto& [device, d] : devices) {
    int64_t carried = 0;
    for (size_t w = 0; w < windows; ++w) {
      if (d.end[w] < 0) {
        d.low[w] = d.high[w] = d.end[w] = carried;
      }
      carried = d.end[w];
    }
  }
  return devices;
}

// Growth over time from the windows, by the rule of growth.h on at most kGrowthWindows groups of consecutive windows
// between the first and the last window with an allocation. The stacks: net bytes allocated by each stack (and not
// freed) at the end of the first analyzed group and at the end of the last.
Growth aggregate_growth(const Report& report, const AggregateTables& t, int level, const AnalyzeOptions& options,
                        const TraceFile& trace) {
  Growth growth;
  int64_t first = -1, last = -1;
  for (const AggregateWindowRow& row : t.windows) {
    if (row.allocs == 0 || row.level == agg::kLevelSegment) continue;
    if (options.filters.device && row.device != *options.filters.device) continue;
    if (first < 0 || row.window < first) first = row.window;
    last = std::max(last, row.window);
  }
  if (first < 0) {
    growth.reason = "nothing was allocated";
    return growth;
  }
  // The window of the last allocation also holds what came after it (the program's shutdown, whose frees say nothing
  // about growth: the full report stops at the last allocation): it is left out.
  if (last > first) --last;
  const size_t spanned = static_cast<size_t>(last - first + 1);
  if (spanned < kMinGrowthWindows) {
    growth.reason = fmt::format("the allocations span {} window(s) of the aggregate trace ({} each): at least {} are "
                                "needed to analyze growth per window",
                                spanned, format_duration(t.window_ns), kMinGrowthWindows);
    return growth;
  }
  const size_t groups = std::min(kGrowthWindows, spanned);
  const size_t per_group = (spanned + groups - 1) / groups;
  const size_t used_groups = (spanned + per_group - 1) / per_group;
  growth.analyzed = true;
  growth.windows = used_groups;
  growth.window_ns = static_cast<int64_t>(per_group) * t.window_ns;
  const int64_t origin = report.trace.start_monotonic_ns.value_or(t.t0_ns);
  growth.start_ns = relative_to(origin, t.t0_ns + first * t.window_ns);
  growth.end_ns = relative_to(origin, t.t0_ns + (last + 1) * t.window_ns);
  const auto group_end_window = [&](size_t g) {
    return static_cast<int64_t>(std::min<size_t>(first + (g + 1) * per_group, last + 1)) - 1;
  };
  StackLoader stacks(trace);
  for (const auto& [device, d] : device_levels(t, level, static_cast<size_t>(last + 1))) {
    if (options.filters.device && device != *options.filters.device) continue;
    std::vector<uint64_t> lows;
    for (size_t g = 0; g < used_groups; ++g) {
      int64_t low = INT64_MAX;
      for (int64_t w = first + static_cast<int64_t>(g * per_group); w <= group_end_window(g); ++w) {
        low = std::min(low, d.low[w]);
      }
      lows.push_back(static_cast<uint64_t>(std::max<int64_t>(low, 0)));
    }
    uint64_t peak = 0;
    for (const DevicePeak& p : report.peaks) {
      if (p.device == device) peak = p.held_bytes.value_or(p.bytes);
    }
    GrowthDevice verdict = evaluate_growth(device, lows, static_cast<double>(growth.window_ns) / 1e9, peak);
    if (verdict.growing) {
      GrowthFinding finding;
      finding.device = device;
      finding.rate_bytes_per_s = verdict.slope_bytes_per_s;
      const size_t from = verdict.first_window;
      finding.start_low_bytes = lows[from];
      finding.end_low_bytes = lows.back();
      finding.start_time_ns = relative_to(origin, t.t0_ns + (group_end_window(from) + 1) * t.window_ns);
      finding.end_time_ns = relative_to(origin, t.t0_ns + (last + 1) * t.window_ns);
      finding.late_start = from > 1;
      for (const AllocFailure& failure : report.failures) {
        if (failure.device == device && failure.device_total) finding.device_total_bytes = failure.device_total;
      }
      if (finding.device_total_bytes && *finding.device_total_bytes > finding.end_low_bytes &&
          finding.rate_bytes_per_s > 0) {
        finding.seconds_until_full =
            static_cast<double>(*finding.device_total_bytes - finding.end_low_bytes) / finding.rate_bytes_per_s;
      }
      // Net bytes per allocating stack at the two moments (the end of group `from` and the end of the run).
      std::unordered_map<int64_t, std::pair<int64_t, int64_t>> net;  // stack -> (at start, at end)
      const int64_t start_window = group_end_window(from);
      for (const AggregateWindowRow& row : t.windows) {
        if (row.device != device || row.level == agg::kLevelSegment) continue;
        if (level == agg::kLevelCuda && row.level != agg::kLevelCuda) continue;
        const int64_t change = static_cast<int64_t>(row.alloc_bytes) - static_cast<int64_t>(row.free_bytes);
        auto& [at_start, at_end] = net[row.stack_id];
        if (row.window <= start_window) at_start += change;
        if (row.window <= last) at_end += change;
      }
      std::vector<GrowthStack> grown;
      for (const auto& [stack_id, bytes] : net) {
        if (bytes.second <= bytes.first) continue;
        grown.push_back(GrowthStack{Stack{},
                                    {stack_id},
                                    static_cast<uint64_t>(std::max<int64_t>(bytes.first, 0)),
                                    static_cast<uint64_t>(bytes.second)});
      }
      finding.growing_stack_groups = grown.size();
      std::sort(grown.begin(), grown.end(), [](const GrowthStack& a, const GrowthStack& b) {
        const uint64_t ga = a.end_bytes - a.start_bytes, gb = b.end_bytes - b.start_bytes;
        return ga != gb ? ga > gb : a.stack_ids.front() < b.stack_ids.front();
      });
      if (grown.size() > options.top_stacks) grown.resize(options.top_stacks);
      for (GrowthStack& g : grown) g.stack = stacks.load(g.stack_ids.front());
      finding.stacks = std::move(grown);
      growth.findings.push_back(std::move(finding));
    }
    growth.devices.push_back(std::move(verdict));
  }
  return growth;
}

// The timeline: one bucket per window; each device's lowest and highest live bytes, and their sums (exact with one
// device; with several, the sums bound the total from below and above).
Timeline aggregate_timeline(const Report& report, const AggregateTables& t, int level, size_t windows) {
  Timeline timeline;
  if (windows == 0) return timeline;
  timeline.bucket_ns = t.window_ns;
  const int64_t origin = report.trace.start_monotonic_ns.value_or(t.t0_ns);
  timeline.total.resize(windows);
  for (size_t w = 0; w < windows; ++w) {
    timeline.total[w].start_ns = relative_to(origin, t.t0_ns + static_cast<int64_t>(w) * t.window_ns);
  }
  for (const auto& [device, d] : device_levels(t, level, windows)) {
    TimelineSeries series;
    series.device = device;
    series.memory_kind = schema::MemoryKind::Device;
    for (size_t w = 0; w < windows; ++w) {
      series.buckets.push_back(TimelineBucket{timeline.total[w].start_ns, static_cast<uint64_t>(d.low[w]),
                                              static_cast<uint64_t>(d.high[w])});
      timeline.total[w].min_bytes += static_cast<uint64_t>(d.low[w]);
      timeline.total[w].max_bytes += static_cast<uint64_t>(d.high[w]);
    }
    series.end_bytes = static_cast<uint64_t>(std::max<int64_t>(d.end[windows - 1], 0));
    timeline.series.push_back(std::move(series));
  }
  return timeline;
}

}  // namespace

std::string AggregateSummary::note() const {
  return fmt::format("aggregate trace: {} of {} events kept; over time per window of {} (windows merge as the run "
                     "goes on); leaks, peaks and failures exact",
                     events_kept, events_seen, format_duration(window_ns));
}

std::string aggregate_refuses(const EventFilters& filters) {
  // A snapshot's name stands for the time it gave (report --at NAME, --since NAME): the refusal names what was typed.
  const std::string option =
      filters.since_ns   ? (filters.since_snapshot ? "--since " + *filters.since_snapshot : "--since")
      : filters.until_ns ? (filters.until_snapshot ? "--at " + *filters.until_snapshot : "--until")
      : filters.range    ? "--range"
      : filters.min_size ? "--min-size"
                         : "";
  if (option.empty()) return "";
  const std::string flag = option.substr(0, option.find(' '));
  return fmt::format("{} needs every event, and this is an aggregate trace (run --aggregate keeps the live set and "
                     "per-window sums): report it without {}, or record a full trace",
                     option, flag);
}

void apply_aggregate(Report& report, const AggregateTables& t, const TraceFile& trace, const AnalyzeOptions& options) {
  auto summary = std::make_shared<AggregateSummary>();
  summary->window_ns = t.window_ns;
  summary->events_seen = t.events_seen;
  summary->events_kept = t.events_kept;
  summary->synchronize_events = t.synchronize_events;
  summary->failures_with_context = t.failures_with_context;
  summary->failures_without_context = t.failures_without_context;

  // Totals: every allocation and free, from the windows (the kept events are a subset).
  Totals& totals = report.totals;
  totals.allocations = totals.allocated_bytes = totals.frees = 0;
  totals.block_allocations = totals.block_frees = 0;
  int64_t last_window = -1;
  bool blocks = false;
  for (const AggregateWindowRow& row : t.windows) {
    last_window = std::max(last_window, row.window);
    if (options.filters.device && row.device != *options.filters.device) continue;
    if (row.level == agg::kLevelCuda) {
      totals.allocations += row.allocs;
      totals.allocated_bytes += row.alloc_bytes;
      totals.frees += row.frees;
    } else if (row.level == agg::kLevelBlock) {
      totals.block_allocations += row.allocs;
      totals.block_frees += row.frees;
      blocks = true;
    }
  }
  const size_t windows = static_cast<size_t>(last_window + 1);
  summary->windows = windows;
  // Where blocks were recorded, growth is at the app's level (blocks and CUDA memory backing no heap), as the full
  // report's is.
  const int level = blocks ? agg::kLevelBlock : agg::kLevelCuda;
  report.growth = aggregate_growth(report, t, level, options, trace);
  report.timeline = aggregate_timeline(report, t, agg::kLevelCuda, windows);

  // Growth per repetition, from each range name's kept ends (every stride-th end past 1024 of them).
  report.ranges.available = report.ranges.available || !t.ranges.empty();
  report.ranges.repeated.clear();
  report.ranges.growth.clear();
  for (const AggregateRangeRow& r : t.ranges) {
    if (r.live_at_end.size() < kMinRangeRepetitions) continue;
    std::vector<uint64_t> series;
    for (int64_t v : r.live_at_end) series.push_back(static_cast<uint64_t>(std::max<int64_t>(v, 0)));
    const double stride = r.repetition.size() >= 2 ? static_cast<double>(r.repetition[1] - r.repetition[0]) : 1.0;
    RangeGrowth verdict = evaluate_range_growth(std::move(series));
    verdict.name = r.name;
    verdict.domain = r.domain;
    verdict.iterations = r.repetitions;
    verdict.bytes_per_iteration /= stride;
    report.ranges.repeated.push_back(verdict);
    if (verdict.growing) report.ranges.growth.push_back(verdict);
  }
  std::sort(report.ranges.growth.begin(), report.ranges.growth.end(),
            [](const RangeGrowth& a, const RangeGrowth& b) { return a.bytes_per_iteration > b.bytes_per_iteration; });
  report.aggregate = std::move(summary);
}

}  // namespace gmt::analysis
