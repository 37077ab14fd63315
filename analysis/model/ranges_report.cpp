// RangeTracker::finish and the growth-per-repetition rule (ranges.h).
#include <algorithm>
#include <cmath>

#include "analysis/model/growth.h"
#include "analysis/model/options.h"
#include "analysis/model/ranges.h"

namespace gmt::analysis {
namespace {

// Raw stacks' bytes grouped as the leaks are (same functions and source lines are one group).
std::vector<GroupBytes> grouped(const std::unordered_map<int64_t, uint64_t>& by_stack, StackGroups& groups) {
  std::map<uint32_t, GroupBytes> by_group;
  for (const auto& [stack_id, bytes] : by_stack) {
    if (bytes == 0) continue;
    GroupBytes& entry = by_group[groups.group_of(stack_id)];
    entry.bytes += bytes;
    entry.stack_ids.push_back(stack_id);
  }
  std::vector<GroupBytes> result;
  for (auto& [group, entry] : by_group) {
    entry.group = group;
    std::sort(entry.stack_ids.begin(), entry.stack_ids.end());
    result.push_back(std::move(entry));
  }
  return result;
}

}  // namespace

RangeGrowth evaluate_range_growth(std::vector<uint64_t> live_at_end) {
  RangeGrowth verdict;
  verdict.iterations = live_at_end.size();
  const size_t n = live_at_end.size();
  if (n >= kMinRangeRepetitions) {
    // Repetitions 1..n-1 (0 is the warm-up); x in repetitions, so the slope is bytes per repetition.
    const double points = static_cast<double>(n - 1);
    double mean_x = 0, mean_y = 0;
    for (size_t i = 1; i < n; ++i) {
      mean_x += static_cast<double>(i - 1);
      mean_y += static_cast<double>(live_at_end[i]);
    }
    mean_x /= points;
    mean_y /= points;
    double covariance = 0, variance = 0;
    for (size_t i = 1; i < n; ++i) {
      const double dx = static_cast<double>(i - 1) - mean_x;
      covariance += dx * (static_cast<double>(live_at_end[i]) - mean_y);
      variance += dx * dx;
    }
    verdict.bytes_per_iteration = variance > 0 ? covariance / variance : 0;
    verdict.fitted_rise_bytes = verdict.bytes_per_iteration * (points - 1);
    // Steps between low watermarks: of each repetition, or, past kGrowthWindows repetitions, of each window of
    // consecutive repetitions (as growth over time does), so that a buffer kept by one repetition in ten is a
    // steady rise and not nine flat steps in ten.
    const size_t analyzed = n - 1;
    const size_t per_window = analyzed > kGrowthWindows ? (analyzed + kGrowthWindows - 1) / kGrowthWindows : 1;
    std::vector<uint64_t> lows;
    for (size_t i = 1; i < n; i += per_window) {
      lows.push_back(*std::min_element(live_at_end.begin() + static_cast<std::ptrdiff_t>(i),
                                       live_at_end.begin() + static_cast<std::ptrdiff_t>(std::min(n, i + per_window))));
    }
    verdict.steps = lows.size() - 1;
    for (size_t i = 0; i + 1 < lows.size(); ++i) {
      if (lows[i + 1] > lows[i]) ++verdict.rising_steps;
      if (lows[i + 1] < lows[i]) ++verdict.falling_steps;
    }
    const uint64_t highest = *std::max_element(live_at_end.begin(), live_at_end.end());
    verdict.threshold_bytes = std::max(kMinRangeGrowthBytes, highest / kRangeGrowthPeakFraction);
    verdict.growing = verdict.bytes_per_iteration > 0 &&
                      rises_steadily(verdict.rising_steps, verdict.falling_steps, verdict.steps) &&
                      verdict.fitted_rise_bytes >= static_cast<double>(verdict.threshold_bytes);
  }
  if (live_at_end.size() > kMaxRangeSeries) live_at_end.resize(kMaxRangeSeries);
  verdict.live_bytes_at_end = std::move(live_at_end);
  return verdict;
}

void RangeTracker::finish(Report& report, int64_t origin, const AnalyzeOptions& options, const StackLoadFn& load_stack,
                          const StackKeyFn& stack_key) {
  RangeReport& result = report.ranges;
  result.available = has_table_;
  result.range_count = occurrences_.size();
  advance(kOpen);  // every range that ended is closed now
  for (const auto& [address, allocation] : live_) {
    RangeStats& bucket = keys_[allocation.bucket].stats;
    ++bucket.live_allocations;
    bucket.live_bytes += allocation.size;
  }
  if (occurrences_.empty()) return;

  for (size_t key = 1; key < keys_.size(); ++key) result.by_name.push_back(keys_[key].stats);
  std::sort(result.by_name.begin(), result.by_name.end(), [](const RangeStats& a, const RangeStats& b) {
    if (a.allocated_bytes != b.allocated_bytes) return a.allocated_bytes > b.allocated_bytes;
    if (a.name != b.name) return a.name < b.name;
    return a.domain < b.domain;
  });
  result.by_name.push_back(keys_[0].stats);
  result.by_name.back().name = "none";

  StackGroups groups(load_stack, stack_key);
  for (size_t key = 1; key < keys_.size(); ++key) {
    KeyState& state = keys_[key];
    if (!state.repeated) continue;
    RangeGrowth verdict = evaluate_range_growth(std::move(state.live_at_end));
    verdict.name = state.stats.name;
    verdict.domain = state.stats.domain;
    if (verdict.growing) {
      GrowthFinding finding;
      attach_growth_stacks(finding, grouped(state.first_snapshot, groups), grouped(state.last_snapshot, groups),
                           options.top_stacks, groups);
      verdict.stacks = std::move(finding.stacks);
      verdict.growing_stack_groups = finding.growing_stack_groups;
      result.growth.push_back(verdict);
    }
    result.repeated.push_back(std::move(verdict));
  }
  auto by_name = [](const RangeGrowth& a, const RangeGrowth& b) {
    return a.name != b.name ? a.name < b.name : a.domain < b.domain;
  };
  std::sort(result.repeated.begin(), result.repeated.end(), by_name);
  std::sort(result.growth.begin(), result.growth.end(), [&](const RangeGrowth& a, const RangeGrowth& b) {
    if (a.bytes_per_iteration != b.bytes_per_iteration) return a.bytes_per_iteration > b.bytes_per_iteration;
    return by_name(a, b);
  });

  // For drawing: outermost first (start/end ranges, then push/pop by depth), then by start.
  std::vector<const Occurrence*> order;
  order.reserve(occurrences_.size());
  for (const Occurrence& occurrence : occurrences_) order.push_back(&occurrence);
  const size_t keep = std::min(kMaxRangeSpans, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                    [](const Occurrence* a, const Occurrence* b) {
                      if (a->depth != b->depth) return a->depth < b->depth;
                      if (a->start_ns != b->start_ns) return a->start_ns < b->start_ns;
                      return a->id < b->id;
                    });
  auto relative = [origin](int64_t absolute) {
    return static_cast<int64_t>(static_cast<uint64_t>(absolute) - static_cast<uint64_t>(origin));
  };
  for (size_t i = 0; i < keep; ++i) {
    const Occurrence& occurrence = *order[i];
    const RangeStats& stats = keys_[occurrence.key].stats;
    RangeSpan span{stats.name,   stats.domain,    occurrence.thread_id, relative(occurrence.start_ns),
                   std::nullopt, occurrence.depth};
    if (occurrence.end_ns != kOpen) span.end_ns = relative(occurrence.end_ns);
    report.range_spans.push_back(std::move(span));
  }
  report.range_spans_left_out = order.size() - keep;
}

}  // namespace gmt::analysis
