#include "analysis/model/diff.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>

#include "analysis/format.h"

namespace gmt::analysis {
namespace {

uint64_t allowed_growth(uint64_t base, const DiffOptions& options) {
  if (options.threshold_percent)
    return static_cast<uint64_t>(static_cast<double>(base) * *options.threshold_percent / 100.0);
  return options.threshold_bytes;
}

bool grew_beyond(uint64_t base, uint64_t next, const DiffOptions& options) {
  return next > base && next - base > allowed_growth(base, options);
}

std::string signed_bytes(int64_t delta) {
  if (delta == 0) return "0 B";
  return (delta > 0 ? "+" : "-") +
         format_bytes(delta > 0 ? static_cast<uint64_t>(delta) : 0 - static_cast<uint64_t>(delta));
}

// "load_weights samples/leaky.cu:19" for the innermost frame that says something.
std::string where(const Stack& stack) {
  if (stack.frames.empty()) return stack.id == 0 ? "(no call stack)" : fmt::format("(call stack {})", stack.id);
  const Frame& frame = stack.frames.front();
  std::string text = frame.function ? *frame.function : "?? " + format_pc(frame.pc);
  if (frame.file) text += " " + *frame.file + (frame.line ? fmt::format(":{}", *frame.line) : "");
  if (frame.module) text += " [" + path_basename(*frame.module) + "]";
  return text;
}

std::string device_or_total(std::optional<int64_t> device) {
  if (!device) return "total";
  return *device < 0 ? "host memory" : fmt::format("device {}", *device);
}

PeakDiff peak_diff(std::optional<int64_t> device, uint64_t base, uint64_t next, const DiffOptions& options) {
  return PeakDiff{device, base, next, grew_beyond(base, next, options)};
}

}  // namespace

const char* to_string(DiffStatus status) {
  switch (status) {
    case DiffStatus::New: return "new";
    case DiffStatus::Gone: return "gone";
    case DiffStatus::Grew: return "grew";
    case DiffStatus::Shrank: return "shrank";
    case DiffStatus::Same: return "same";
  }
  return "same";
}

const char* GrowthDiff::status() const {
  if (base_rate_bytes_per_s && new_rate_bytes_per_s) return "both";
  return new_rate_bytes_per_s ? "appeared" : "disappeared";
}

namespace {

std::vector<AllocatorDiff> diff_allocators(const Report& base, const Report& next) {
  std::map<int64_t, AllocatorDiff> by_device;
  auto add = [&by_device](const Report& report, std::optional<AllocatorFigures> AllocatorDiff::*side) {
    if (!report.allocator_stats) return;
    for (const AllocatorDevice& d : report.allocator_stats->devices) {
      AllocatorDiff& entry = by_device[d.device];
      entry.device = d.device;
      entry.*side = AllocatorFigures{d.allocator_name,    d.peak_reserved_bytes,
                                     d.peak_in_use_bytes, d.peak_inactive_split_bytes,
                                     d.alloc_retries,     d.ooms};
    }
  };
  add(base, &AllocatorDiff::base);
  add(next, &AllocatorDiff::next);
  std::vector<AllocatorDiff> list;
  for (auto& [device, entry] : by_device) list.push_back(std::move(entry));
  return list;
}

}  // namespace

std::string diff_stack_key(const Stack& stack) {
  if (stack.frames.empty()) return "(no frames)";  // no stack, or a missing one: nothing to tell them apart
  std::string key;
  for (const Frame& frame : stack.frames) {
    if (frame.function) {
      key += "f:" + *frame.function + '\x1f' + frame.file.value_or("") + '\x1f' +
             (frame.line ? std::to_string(*frame.line) : std::string());
    } else if (frame.module && frame.module_offset) {
      key += "m:" + path_basename(*frame.module) + '\x1f' + format_pc(*frame.module_offset);
    } else {
      key += "?";  // a pc in no known module cannot be matched across runs; it still takes its place
    }
    key += '\x1e';
  }
  return key;
}

TraceDiff diff_reports(const Report& base, const Report& next, const DiffOptions& options) {
  TraceDiff diff;
  diff.base_path = base.trace.path;
  diff.new_path = next.trace.path;
  diff.options = options;

  // Leaks per matching key; several groups of one run can share a key (frames that differ only by pc).
  std::map<std::string, LeakDiff> leaks;
  for (const LeakGroup& group : base.leaks) {
    LeakDiff& entry = leaks[diff_stack_key(group.stack)];
    if (entry.base_count == 0) entry.stack = group.stack;
    entry.base_bytes += group.bytes;
    entry.base_count += group.count;
  }
  for (const LeakGroup& group : next.leaks) {
    LeakDiff& entry = leaks[diff_stack_key(group.stack)];
    if (entry.new_count == 0) entry.stack = group.stack;  // the new run's frames are the ones to look at
    entry.new_bytes += group.bytes;
    entry.new_count += group.count;
  }
  for (auto& [key, entry] : leaks) {
    entry.key = key;
    const bool in_base = entry.base_count > 0 || entry.base_bytes > 0;
    const bool in_new = entry.new_count > 0 || entry.new_bytes > 0;
    if (!in_base) {
      entry.status = DiffStatus::New;
    } else if (!in_new) {
      entry.status = DiffStatus::Gone;
    } else if (entry.new_bytes > entry.base_bytes) {
      entry.status = DiffStatus::Grew;
    } else if (entry.new_bytes < entry.base_bytes) {
      entry.status = DiffStatus::Shrank;
    }
    entry.regression = entry.status == DiffStatus::New ||
                       (entry.status == DiffStatus::Grew && grew_beyond(entry.base_bytes, entry.new_bytes, options));
    diff.leaks.push_back(std::move(entry));
  }
  std::stable_sort(diff.leaks.begin(), diff.leaks.end(), [](const LeakDiff& a, const LeakDiff& b) {
    if (a.regression != b.regression) return a.regression;
    const uint64_t da = a.new_bytes > a.base_bytes ? a.new_bytes - a.base_bytes : a.base_bytes - a.new_bytes;
    const uint64_t db = b.new_bytes > b.base_bytes ? b.new_bytes - b.base_bytes : b.base_bytes - b.new_bytes;
    if (da != db) return da > db;
    return std::max(a.base_bytes, a.new_bytes) > std::max(b.base_bytes, b.new_bytes);
  });

  diff.total_peak = peak_diff(std::nullopt, base.totals.peak_bytes, next.totals.peak_bytes, options);
  std::map<int64_t, std::pair<uint64_t, uint64_t>> device_peaks;
  for (const DevicePeak& peak : base.peaks) device_peaks[peak.device].first = peak.bytes;
  for (const DevicePeak& peak : next.peaks) device_peaks[peak.device].second = peak.bytes;
  for (const auto& [device, bytes] : device_peaks) {
    diff.device_peaks.push_back(peak_diff(device, bytes.first, bytes.second, options));
  }
  diff.leaked = peak_diff(std::nullopt, base.totals.leaked_bytes, next.totals.leaked_bytes, options);

  std::map<int64_t, GrowthDiff> growth;
  for (const GrowthFinding& finding : base.growth.findings) {
    growth[finding.device].device = finding.device;
    growth[finding.device].base_rate_bytes_per_s = finding.rate_bytes_per_s;
  }
  for (const GrowthFinding& finding : next.growth.findings) {
    growth[finding.device].device = finding.device;
    growth[finding.device].new_rate_bytes_per_s = finding.rate_bytes_per_s;
  }
  for (auto& [device, entry] : growth) diff.growth.push_back(entry);
  diff.base_growth_analyzed = base.growth.analyzed;
  diff.new_growth_analyzed = next.growth.analyzed;

  // The sentences that make --fail-on-regression fail.
  for (const LeakDiff& leak : diff.leaks) {
    if (!leak.regression) continue;
    if (leak.status == DiffStatus::New) {
      diff.regressions.push_back(
          fmt::format("new leak: {} in {} at {}", format_bytes_exact(leak.new_bytes),
                      leak.new_count == 1 ? std::string("1 allocation") : fmt::format("{} allocations", leak.new_count),
                      where(leak.stack)));
    } else {
      diff.regressions.push_back(fmt::format("leak grew by {} ({} -> {}) at {}", signed_bytes(leak.delta()),
                                             format_bytes(leak.base_bytes), format_bytes(leak.new_bytes),
                                             where(leak.stack)));
    }
  }
  if (diff.leaked.regression) {
    diff.regressions.push_back(fmt::format("leaked bytes grew by {} ({} -> {})", signed_bytes(diff.leaked.delta()),
                                           format_bytes_exact(diff.leaked.base_bytes),
                                           format_bytes_exact(diff.leaked.new_bytes)));
  }
  diff.allocators = diff_allocators(base, next);
  std::vector<const PeakDiff*> peaks{&diff.total_peak};
  for (const PeakDiff& peak : diff.device_peaks) peaks.push_back(&peak);
  for (const PeakDiff* peak : peaks) {
    if (!peak->regression) continue;
    diff.regressions.push_back(fmt::format("{} peak grew by {} ({} -> {})", device_or_total(peak->device),
                                           signed_bytes(peak->delta()), format_bytes_exact(peak->base_bytes),
                                           format_bytes_exact(peak->new_bytes)));
  }
  for (const GrowthDiff& entry : diff.growth) {
    if (!entry.regression()) continue;
    diff.regressions.push_back(
        fmt::format("new growth finding on {}: {}/s", device_or_total(entry.device),
                    format_bytes(static_cast<uint64_t>(std::max(0.0, *entry.new_rate_bytes_per_s)))));
  }
  return diff;
}

}  // namespace gmt::analysis
