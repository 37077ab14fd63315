// The text report's sections on a framework allocator's own statistics (allocator_stats.h): per device, the
// allocator's curve beside the CUDA-level one, its fragmentation figures, the cache at the end and the advice;
// then each PyTorch out-of-memory error. docs/analysis.md defines every number shown.
#include <fmt/core.h>

#include <algorithm>
#include <climits>
#include <cmath>

#include "analysis/format.h"
#include "analysis/render/render_text_parts.h"

namespace gmt::analysis {
namespace {

constexpr size_t kSparkWidth = 60;

// One mark per column, all three curves on one scale, so that the gap between reserved and in use reads.
std::string scaled_sparkline(const std::vector<uint64_t>& columns, uint64_t highest) {
  static constexpr const char* kBlocks[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  std::string line;
  for (uint64_t value : columns) {
    if (value == 0 || highest == 0) {
      line += ' ';
      continue;
    }
    const double eighths = std::ceil(static_cast<double>(value) / static_cast<double>(highest) * 8.0);
    line += kBlocks[std::clamp(static_cast<int>(eighths), 1, 8) - 1];
  }
  return line;
}

std::string trigger_counts(const AllocatorDevice& d) {
  using schema::SampleTrigger;
  std::string text;
  auto add = [&](SampleTrigger trigger, const char* what) {
    const uint64_t n = d.samples_by_trigger[static_cast<int>(trigger)];
    if (n == 0) return;
    text += fmt::format("{}{} {}", text.empty() ? "" : ", ", n, what);
  };
  add(SampleTrigger::Cadence, "periodic");
  add(SampleTrigger::RangeEnd, "at NVTX range ends");
  add(SampleTrigger::Oom, "at out-of-memory errors");
  add(SampleTrigger::Exit, "at exit");
  return text;
}

void append_device(std::string& out, const Report& report, const AllocatorDevice& d) {
  out += fmt::format("\n{} on device {}: {} sample{} ({})\n", d.allocator_name, d.device, d.samples,
                     d.samples == 1 ? "" : "s", trigger_counts(d));
  const AllocatorCurves curves = allocator_curves(report, d, kSparkWidth);
  const uint64_t highest =
      std::max({curves.highest(curves.reserved), curves.highest(curves.in_use), curves.highest(curves.cuda_level)});
  out += fmt::format("  reserved    {}  up to {} (at {})\n", scaled_sparkline(curves.reserved, highest),
                     format_bytes(d.peak_reserved_bytes), format_duration(d.peak_reserved_time_ns));
  out += fmt::format("  in use      {}  up to {} (at {})\n", scaled_sparkline(curves.in_use, highest),
                     format_bytes(d.peak_in_use_bytes), format_duration(d.peak_in_use_time_ns));
  out += fmt::format("  CUDA level  {}  up to {} (live bytes as the trace counts them)\n",
                     scaled_sparkline(curves.cuda_level, highest), format_bytes(curves.highest(curves.cuda_level)));
  out += fmt::format("              (0 to {}, highest level per mark, one scale)\n", format_duration(curves.end_ns));
  if (d.peak_inactive_split_bytes) {
    const uint64_t reserved = d.reserved_at_peak_inactive_split_bytes;
    out += fmt::format("  inactive split bytes: peak {} at {}", format_bytes_exact(*d.peak_inactive_split_bytes),
                       format_duration(d.peak_inactive_split_time_ns));
    if (reserved > 0) {
      out += fmt::format(", {:.0f}% of the {} reserved then",
                         100.0 * static_cast<double>(*d.peak_inactive_split_bytes) / static_cast<double>(reserved),
                         format_bytes(reserved));
    }
    out += "\n";
  }
  if (d.alloc_retries || d.ooms) {
    out += fmt::format("  alloc retries {}, OOMs {}\n", d.alloc_retries ? std::to_string(*d.alloc_retries) : "-",
                       d.ooms ? std::to_string(*d.ooms) : "-");
  }
  out += fmt::format("  at the end: {} in use, {} reserved", format_bytes_exact(d.last.in_use_bytes),
                     format_bytes_exact(d.last.reserved_bytes));
  if (d.cached_at_end_bytes > 0) {
    out += fmt::format(": {} is {}", format_bytes(d.cached_at_end_bytes), cache_explanation(d.allocator));
  }
  out += "\n";
  if (!d.advice.empty()) out += "  advice: " + d.advice + "\n";
}

void append_oom(std::string& out, const AllocatorOom& oom, const RenderOptions& options) {
  const AllocatorSample& s = oom.sample;
  out += fmt::format("\ntorch.cuda.OutOfMemoryError on device {} at {} ({}): request {}\n", oom.device,
                     format_duration(oom.time_ns), allocator_display_name(oom.allocator),
                     format_bytes_exact(s.request_bytes.value_or(0)));
  const uint64_t cached = s.reserved_bytes > s.in_use_bytes ? s.reserved_bytes - s.in_use_bytes : 0;
  out += fmt::format("    allocator then: {} in use, {} reserved ({} cached)", format_bytes_exact(s.in_use_bytes),
                     format_bytes_exact(s.reserved_bytes), format_bytes(cached));
  if (s.inactive_split_bytes) out += fmt::format(", inactive split {}", format_bytes_exact(*s.inactive_split_bytes));
  if (s.alloc_retries) out += fmt::format("; alloc retries {}", *s.alloc_retries);
  if (s.ooms) out += fmt::format(", OOMs {}", *s.ooms);
  out += "\n";
  if (oom.device_free_bytes) {
    out += fmt::format("    device free: {}",
                       format_bytes_exact(static_cast<uint64_t>(std::max<int64_t>(0, *oom.device_free_bytes))));
    if (oom.device_total_bytes)
      out += " of " + format_bytes(static_cast<uint64_t>(std::max<int64_t>(0, *oom.device_total_bytes)));
    out += " (cudaMemGetInfo at the CUDA-level failure, see Failed allocations)\n";
  } else if (oom.cuda_failure_event_id) {
    out += "    device free: not recorded at the CUDA-level failure\n";
  } else {
    out += "    device free: unknown (no CUDA-level allocation failed: a limit of PyTorch's own, e.g. "
           "torch.cuda.set_per_process_memory_fraction)\n";
  }
  if (s.inactive_split_bytes && s.request_bytes && cached >= *s.request_bytes && *s.inactive_split_bytes > 0) {
    out += "    more was cached than requested, but split: fragmentation inside PyTorch's segments (see the advice "
           "above)\n";
  }
  out += fmt::format("    CUDA-level memory live on device {} then: {}{}\n", oom.device,
                     format_bytes(oom.cuda_live_bytes), oom.top_stacks.empty() ? "" : "; largest first:");
  const size_t shown = std::min({oom.top_stacks.size(), options.top, kTextStacksPerMoment});
  for (size_t i = 0; i < shown; ++i) {
    const StackBytes& held = oom.top_stacks[i];
    out += fmt::format(
        "      {:<30} {}\n",
        fmt::format("{} in {} allocation{}", format_bytes(held.bytes), held.count, held.count == 1 ? "" : "s"),
        one_line_stack(held.stack));
  }
  if (oom.stack_groups > shown) {
    out += fmt::format("      ... {} more call stacks (--format json has the top {} with full stacks)\n",
                       oom.stack_groups - shown, oom.top_stacks.size());
  }
}

}  // namespace

uint64_t AllocatorCurves::highest(const std::vector<uint64_t>& values) {
  uint64_t high = 0;
  for (uint64_t v : values) high = std::max(high, v);
  return high;
}

AllocatorCurves allocator_curves(const Report& report, const AllocatorDevice& d, size_t columns) {
  AllocatorCurves curves;
  const Timeline& timeline = report.timeline;
  int64_t end =
      std::max<int64_t>(report.trace.duration_ns, timeline.bucket_ns * static_cast<int64_t>(timeline.total.size()));
  for (const AllocatorSample& sample : d.series) {  // a damaged trace may hold any time: no overflow
    if (sample.time_ns > end && sample.time_ns < INT64_MAX) end = sample.time_ns + 1;
  }
  curves.end_ns = std::max<int64_t>(end, 1);
  curves.reserved.assign(columns, 0);
  curves.in_use.assign(columns, 0);
  curves.cuda_level.assign(columns, 0);
  auto column_of = [&](int64_t t) {
    if (t <= 0) return size_t{0};
    const double at = static_cast<double>(t) / static_cast<double>(curves.end_ns) * static_cast<double>(columns);
    return at < static_cast<double>(columns - 1) ? static_cast<size_t>(at) : columns - 1;
  };
  // The allocator's level holds from one sample to the next: carried into the columns between samples.
  size_t next = 0;
  uint64_t reserved = 0, in_use = 0;
  bool started = false;
  for (size_t c = 0; c < columns; ++c) {
    uint64_t column_reserved = started ? reserved : 0, column_in_use = started ? in_use : 0;
    while (next < d.series.size() && column_of(d.series[next].time_ns) <= c) {
      reserved = d.series[next].reserved_bytes;
      in_use = d.series[next].in_use_bytes;
      column_reserved = std::max(column_reserved, reserved);
      column_in_use = std::max(column_in_use, in_use);
      started = true;
      ++next;
    }
    curves.reserved[c] = column_reserved;
    curves.in_use[c] = column_in_use;
  }
  for (const TimelineSeries& series : timeline.series) {
    if (series.device != d.device) continue;
    // Per column, the most of each kind: an upper bound of their sum at one moment.
    std::vector<uint64_t> kind(columns, 0);
    for (const TimelineBucket& bucket : series.buckets) {
      const size_t from = column_of(bucket.start_ns);
      const size_t to = column_of(bucket.start_ns + std::max<int64_t>(timeline.bucket_ns, 1) - 1);
      for (size_t c = from; c <= to; ++c) kind[c] = std::max(kind[c], bucket.max_bytes);
    }
    for (size_t c = 0; c < columns; ++c) curves.cuda_level[c] += kind[c];
  }
  return curves;
}

void append_allocator_stats(std::string& out, const Report& report) {
  if (!report.allocator_stats || report.allocator_stats->devices.empty()) return;
  out += fmt::format("\nFramework allocator statistics (the allocator's own figures, {} samples)\n",
                     report.allocator_stats->samples);
  for (const AllocatorDevice& d : report.allocator_stats->devices) append_device(out, report, d);
}

void append_allocator_ooms(std::string& out, const Report& report, const RenderOptions& options) {
  if (!report.allocator_stats || report.allocator_stats->ooms.empty()) return;
  out += fmt::format("\nPyTorch out of memory ({})\n", report.allocator_stats->ooms.size());
  for (const AllocatorOom& oom : report.allocator_stats->ooms) append_oom(out, oom, options);
}

}  // namespace gmt::analysis
