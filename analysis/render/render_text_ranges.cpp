// The text report's NVTX sections: the filters in effect (under the header), memory by range and the
// growth per repetition of repeated ranges (after the growth over time).
#include <fmt/core.h>

#include <algorithm>

#include "analysis/format.h"
#include "analysis/model/ranges.h"
#include "analysis/read/trace_tables.h"
#include "analysis/render/render_text_parts.h"

namespace gmt::analysis {
namespace {

std::string range_label(const std::string& domain, const std::string& name) {
  std::string label = name.empty() ? "(unnamed)" : name;
  return domain.empty() ? label : domain + ": " + label;
}

std::string count_and_bytes(uint64_t count, uint64_t bytes) {
  return count == 0 ? std::string("-") : fmt::format("{} ({})", count, format_bytes(bytes));
}

void append_range_growth(std::string& out, const RangeReport& ranges, const RenderOptions& options) {
  if (ranges.repeated.empty()) return;
  out += fmt::format("\nGrowth per repetition of NVTX ranges (live bytes made inside the range, at the end of "
                     "each repetition; ranges repeated {} times or more)\n",
                     kMinRangeRepetitions);
  for (const RangeGrowth& range : ranges.growth) {
    const uint64_t first = range.live_bytes_at_end.size() > 1 ? range.live_bytes_at_end[1] : 0;
    const uint64_t last = range.live_bytes_at_end.empty() ? 0 : range.live_bytes_at_end.back();
    out += fmt::format("  '{}' grows by {} per repetition over {} repetitions: {} -> {} live at their ends "
                       "(rose in {} of {} steps; the first repetition is the warm-up)\n",
                       range_label(range.domain, range.name),
                       format_bytes(static_cast<uint64_t>(std::max(0.0, range.bytes_per_iteration))), range.iterations,
                       format_bytes(first), format_bytes(last), range.rising_steps, range.steps);
    const size_t shown = std::min({range.stacks.size(), options.top, kTextStacksPerMoment});
    if (shown > 0) out += "    growing call stacks, largest growth first:\n";
    for (size_t i = 0; i < shown; ++i) {
      const GrowthStack& grown = range.stacks[i];
      std::string amount = fmt::format("+{} ({} -> {})", format_bytes(grown.end_bytes - grown.start_bytes),
                                       format_bytes(grown.start_bytes), format_bytes(grown.end_bytes));
      out += fmt::format("      {:<30} {}\n", amount, one_line_stack(grown.stack));
    }
    if (range.growing_stack_groups > shown) {
      out += fmt::format("      ... {} more growing stack(s) (--format json)\n", range.growing_stack_groups - shown);
    }
  }
  for (const RangeGrowth& range : ranges.repeated) {
    if (range.growing) continue;
    out += fmt::format("  '{}': no steady growth over {} repetitions\n", range_label(range.domain, range.name),
                       range.iterations);
  }
}

}  // namespace

void append_filters(std::string& out, const Report& report) {
  const FilterSummary& summary = report.filters;
  if (!summary.filters.any()) return;
  out += fmt::format("  filters    {} ({} of {} allocations analyzed)\n", describe_filters(summary.filters),
                     summary.allocations_matched, summary.allocations_seen);
  if (!summary.nothing_matched.empty()) out += "note: " + summary.nothing_matched + "\n";
}

void append_ranges(std::string& out, const Report& report, const RenderOptions& options) {
  const RangeReport& ranges = report.ranges;
  out += "\nMemory by NVTX range\n";
  if (!ranges.available) {
    out += "  " + missing_table_note("ranges") + "\n";  // an older schema's trace, or a damaged one
    return;
  }
  if (ranges.by_name.empty()) {
    out += "  the trace has no NVTX ranges (the program opened none";
    out += report.filters.filters.any() ? " that the filters keep)\n" : ")\n";
    return;
  }
  out += fmt::format("  {} range occurrences; each allocation counts in the innermost range open on its thread\n",
                     ranges.range_count);
  out += fmt::format("  {:<32} {:>6}  {:<22} {:<22} {:<22} {}\n", "range", "reps", "allocated", "freed", "live at end",
                     "peak inside");
  const size_t named = ranges.by_name.size() - 1;  // the last is `none`
  const size_t shown = std::min(named, options.top);
  auto row = [&out](const RangeStats& range, const std::string& label) {
    out += fmt::format("  {:<32} {:>6}  {:<22} {:<22} {:<22} {}\n", label,
                       range.none ? std::string("-") : std::to_string(range.repetitions),
                       count_and_bytes(range.allocations, range.allocated_bytes),
                       count_and_bytes(range.frees, range.freed_bytes),
                       count_and_bytes(range.live_allocations, range.live_bytes),
                       range.none ? std::string("-") : format_bytes(range.peak_live_bytes));
  };
  for (size_t i = 0; i < shown; ++i)
    row(ranges.by_name[i], range_label(ranges.by_name[i].domain, ranges.by_name[i].name));
  if (shown < named) out += fmt::format("  ... {} more range names (--top, or --format json)\n", named - shown);
  row(ranges.by_name.back(), "(outside every range)");
  append_range_growth(out, ranges, options);
}

}  // namespace gmt::analysis
