// The text report's sections about memory over time: sparkline and stacks at the peak, growth,
// failure forensics (fragmentation and pools: render_text_pools.cpp). docs/analysis.md defines every number shown.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "analysis/format.h"
#include "analysis/model/stack_view.h"
#include "analysis/render/render_text_parts.h"

namespace gmt::analysis {
namespace {

// The shortest span between the low watermarks compared from which a rate per second is printed (and the device
// projected full); shorter growth is told in bytes.
constexpr int64_t kMinGrowthSpanForRateNs = 10'000'000'000;

// A stack on one line, where to look first: the user's own frame (analysis/model/stack_view.h), else the innermost.
std::string stack_summary(const Stack& stack) {
  if (stack.id == 0) return "(no call stack recorded)";
  if (stack.missing) return fmt::format("(call stack {} is missing from the trace)", stack.id);
  if (stack.frames.empty()) return "(empty call stack)";
  const Frame* user = user_frame(stack);
  return "at " + frame_label(user ? *user : stack.frames.front());
}

void append_held(std::string& out, const std::vector<StackBytes>& stacks, uint64_t total_groups,
                 const RenderOptions& options, const char* indent = "    ") {
  const size_t shown = std::min({stacks.size(), options.top, kTextStacksPerMoment});
  for (size_t i = 0; i < shown; ++i) {
    const StackBytes& held = stacks[i];
    std::string amount =
        fmt::format("{} in {}", format_bytes(held.bytes), count_of(held.count, "allocation", "allocations"));
    out += fmt::format("{}{:<30} {}\n", indent, amount, stack_summary(held.stack));
  }
  if (total_groups > shown) {
    out += fmt::format("{}... {} (--format json has the top {} with full stacks)\n", indent,
                       count_of(total_groups - shown, "more call stack", "more call stacks"), stacks.size());
  }
}

}  // namespace

std::string sparkline(const std::vector<TimelineBucket>& buckets, size_t width) {
  static constexpr const char* kBlocks[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  if (buckets.empty() || width == 0) return "";
  uint64_t highest = 0;
  for (const TimelineBucket& bucket : buckets) highest = std::max(highest, bucket.max_bytes);
  const size_t columns = std::min(width, buckets.size());
  std::string line;
  for (size_t c = 0; c < columns; ++c) {
    const size_t from = c * buckets.size() / columns;
    const size_t to = (c + 1) * buckets.size() / columns;
    uint64_t value = 0;
    for (size_t i = from; i < to; ++i) value = std::max(value, buckets[i].max_bytes);
    if (value == 0) {
      line += ' ';
      continue;
    }
    // 1..8 eighths of the highest level, rounded up so that any live memory shows.
    const double eighths = std::ceil(static_cast<double>(value) / static_cast<double>(highest) * 8.0);
    line += kBlocks[std::clamp(static_cast<int>(eighths), 1, 8) - 1];
  }
  return line;
}

std::string format_seconds(double seconds) {
  if (!(seconds >= 0)) return "an unknown time";
  if (seconds < 60) return fmt::format("{:.1f} s", seconds);
  if (seconds < 3600) return fmt::format("{:.1f} min", seconds / 60);
  if (seconds < 48 * 3600) return fmt::format("{:.1f} h", seconds / 3600);
  if (seconds < 1000.0 * 365 * 86400) return fmt::format("{:.1f} days", seconds / 86400);
  return "more than 1000 years";
}

void append_peak_over_time(std::string& out, const Report& report, const RenderOptions& options) {
  const Timeline& timeline = report.timeline;
  if (!timeline.total.empty()) {
    const int64_t end = timeline.bucket_ns * static_cast<int64_t>(timeline.total.size());
    out += fmt::format("  over time  {}  (0 to {}, highest level per mark)\n", sparkline(timeline.total, 60),
                       format_duration(end));
    // With several devices or kinds, the total hides which one moved: one line each, on the same time axis,
    // each scaled to its own highest level.
    if (timeline.series.size() > 1) {
      for (const TimelineSeries& series : timeline.series) {
        uint64_t highest = 0;
        for (const TimelineBucket& bucket : series.buckets) highest = std::max(highest, bucket.max_bytes);
        out += fmt::format("             {}  {} {} (up to {})\n", sparkline(series.buckets, 60),
                           device_name(series.device), schema::to_string(series.memory_kind), format_bytes(highest));
      }
    }
  }
  for (const DevicePeak& peak : report.peaks) {
    if (peak.held_bytes) {  // framework heaps: who held the memory is said at the app's own peak
      out += fmt::format("  {} peaked at {} at {}; the app held the most, {}, at {}, largest first:\n",
                         device_name(peak.device), format_bytes(peak.bytes), format_duration(peak.time_ns),
                         format_bytes(*peak.held_bytes), format_duration(peak.held_time_ns));
      append_held(out, peak.stacks, peak.stack_groups, options);
      continue;
    }
    out += fmt::format("  {} peaked at {} at {}; live then, largest first:\n", device_name(peak.device),
                       format_bytes(peak.bytes), format_duration(peak.time_ns));
    append_held(out, peak.stacks, peak.stack_groups, options);
  }
}

void append_growth(std::string& out, const Report& report, const RenderOptions& options) {
  const Growth& growth = report.growth;
  out += "\nGrowth (low watermark of live memory over time)\n";
  if (!growth.analyzed) {
    out += fmt::format("  not analyzed: {}\n", growth.reason);
    return;
  }
  if (growth.findings.empty()) {
    out += fmt::format("  no steady growth ({} windows of {} from {} to {}; the first is the warm-up)\n",
                       growth.windows, format_duration(growth.window_ns), format_duration(growth.start_ns),
                       format_duration(growth.end_ns));
    return;
  }
  for (const GrowthFinding& finding : growth.findings) {
    const GrowthDevice* verdict = nullptr;
    for (const GrowthDevice& device : growth.devices) {
      if (device.device == finding.device) verdict = &device;
    }
    // A rate per second only from a span long enough to mean one: "24 GiB/s" from 33 ms of start-up is not.
    const bool rate_holds = finding.end_time_ns - finding.start_time_ns >= kMinGrowthSpanForRateNs;
    const uint64_t grown =
        finding.end_low_bytes > finding.start_low_bytes ? finding.end_low_bytes - finding.start_low_bytes : 0;
    const std::string how =
        rate_holds ? fmt::format("grows steadily at {}/s",
                                 format_bytes(static_cast<uint64_t>(std::max(0.0, finding.rate_bytes_per_s))))
                   : fmt::format("grew steadily by {}", format_bytes(grown));
    out += fmt::format("  {} {}: low watermark {} at {} -> {} at {}", device_name(finding.device), how,
                       format_bytes(finding.start_low_bytes), format_duration(finding.start_time_ns),
                       format_bytes(finding.end_low_bytes), format_duration(finding.end_time_ns));
    if (verdict && finding.late_start) {
      out += fmt::format(" (steady until {}, then rose without falling: windows {} to {})",
                         format_duration(finding.start_time_ns), verdict->first_window, growth.windows - 1);
    } else if (verdict) {
      out += fmt::format(" (rose in {} of {} windows)", verdict->rising_steps, verdict->steps);
    }
    out += "\n";
    if (rate_holds && finding.seconds_until_full && finding.device_total_bytes) {
      if (*finding.seconds_until_full > 0) {
        out += fmt::format("    at this rate {} is full in {} (of {})\n", device_name(finding.device),
                           format_seconds(*finding.seconds_until_full), format_bytes(*finding.device_total_bytes));
      } else {
        out += fmt::format("    {} has no room left to grow: its low watermark reached its {} in total\n",
                           device_name(finding.device), format_bytes(*finding.device_total_bytes));
      }
    }
    const size_t shown = std::min({finding.stacks.size(), options.top, kTextStacksPerMoment});
    if (shown > 0) out += "    growing call stacks, largest growth first:\n";
    for (size_t i = 0; i < shown; ++i) {
      const GrowthStack& grown = finding.stacks[i];
      std::string amount = fmt::format("+{} ({} -> {})", format_bytes(grown.end_bytes - grown.start_bytes),
                                       format_bytes(grown.start_bytes), format_bytes(grown.end_bytes));
      out += fmt::format("      {:<30} {}\n", amount, stack_summary(grown.stack));
    }
    if (finding.growing_stack_groups > shown) {
      out += fmt::format("      ... {} (--format json)\n",
                         count_of(finding.growing_stack_groups - shown, "more growing stack", "more growing stacks"));
    }
  }
}

void append_failure_label(std::string& out, const AllocFailure& failure) {
  if (append_heap_failure_label(out, failure)) return;
  if (failure.label == "fragmentation") {
    out += "    label: fragmentation (more memory was free than requested, but no free block was large enough)\n";
  } else if (failure.label == "out of memory") {
    out += "    label: out of memory (less memory was free than requested)\n";
  } else if (failure.label == "unknown") {
    out += "    label: unknown (the free memory at that moment was not recorded)\n";
  }
}

void append_failure_forensics(std::string& out, const AllocFailure& failure, const RenderOptions& options) {
  // No address gap here: gaps between the driver's allocations do not say whether a cudaMalloc fits (the
  // JSON report keeps failure.fragmentation, labelled as address-space layout).
  if (!failure.top_stacks.empty()) {
    out += "    holding the most memory then:\n";
    append_held(out, failure.top_stacks, failure.top_stacks.size(), options, "      ");
  }
}

}  // namespace gmt::analysis

namespace gmt::analysis {

std::string one_line_stack(const Stack& stack) { return stack_summary(stack); }

}  // namespace gmt::analysis
