// The text report's "PyTorch tensors (block-level)" section (docs/analysis.md): what the tensors held, whether
// that grew, and which Python lines hold what is still alive at exit. Every number comes from
// Report::tensor_blocks.
#include <fmt/core.h>

#include <algorithm>

#include "analysis/format.h"
#include "analysis/model/findings.h"
#include "analysis/model/tensor_blocks.h"
#include "analysis/render/render_text_parts.h"

namespace gmt::analysis {
namespace {

// "at fn file:line" of the frame that names the app's line, plus the innermost frame when that is another one.
// `unsampled`: what a block without a stack means in this trace (unsampled_block_stack_text), or empty.
std::string named_line(const Stack& stack, const std::string& unsampled) {
  const Frame* app = app_python_frame(stack);
  if (!app && stack.id == 0 && !unsampled.empty()) return unsampled;
  if (!app)
    return stack.id == 0 ? "(no Python stack: allocated outside Python, e.g. by autograd's thread)"
                         : one_line_stack(stack);
  std::string line = fmt::format("at {} {}", app->function.value_or("??"), app->file.value_or("??"));
  if (app->line) line += fmt::format(":{}", *app->line);
  return line;
}

void append_growing(std::string& out, const std::vector<GrowthStack>& stacks, uint64_t total,
                    const RenderOptions& options, const std::string& unsampled) {
  const size_t shown = std::min({stacks.size(), options.top, kTextStacksPerMoment});
  if (shown > 0) out += "    growing Python stacks, largest growth first:\n";
  for (size_t i = 0; i < shown; ++i) {
    const GrowthStack& grown = stacks[i];
    std::string amount = fmt::format("+{} ({} -> {})", format_bytes(grown.end_bytes - grown.start_bytes),
                                     format_bytes(grown.start_bytes), format_bytes(grown.end_bytes));
    out += fmt::format("      {:<30} {}\n", amount, named_line(grown.stack, unsampled));
  }
  if (total > shown) out += fmt::format("      ... {} (--format json)\n", count_of(total - shown, "more", "more"));
}

void append_block_growth(std::string& out, const TensorBlockReport& blocks, const RenderOptions& options,
                         const std::string& unsampled) {
  const Growth& growth = blocks.growth;
  if (!growth.analyzed) {
    out += fmt::format("  growth over time: not analyzed: {}\n", growth.reason);
  } else if (growth.findings.empty()) {
    out +=
        fmt::format("  growth over time: none ({} windows of {})\n", growth.windows, format_duration(growth.window_ns));
  }
  for (const GrowthFinding& finding : growth.findings) {
    out += fmt::format("  tensors on device {} grow steadily at {}/s: low watermark {} at {} -> {} at {}\n",
                       finding.device, format_bytes(static_cast<uint64_t>(std::max(0.0, finding.rate_bytes_per_s))),
                       format_bytes(finding.start_low_bytes), format_duration(finding.start_time_ns),
                       format_bytes(finding.end_low_bytes), format_duration(finding.end_time_ns));
    append_growing(out, finding.stacks, finding.growing_stack_groups, options, unsampled);
  }
  for (const RangeGrowth& range : blocks.range_growth) {
    out += fmt::format("  tensors kept per repetition of NVTX range '{}': +{} per repetition over {} repetitions\n",
                       range.name, format_bytes(static_cast<uint64_t>(std::max(0.0, range.bytes_per_iteration))),
                       range.iterations);
    append_growing(out, range.stacks, range.growing_stack_groups, options, unsampled);
  }
}

void append_alive_at_exit(std::string& out, const TensorBlockReport& blocks, const RenderOptions& options,
                          const std::string& unsampled) {
  const Totals& totals = blocks.totals;
  if (totals.leaked_allocations == 0) {
    out += "  tensors alive at exit: none\n";
    return;
  }
  out += fmt::format(
      "  tensors alive at exit: {} in {}\n"
      "    (held by tensors when the trace ended; PyTorch returns its cached segments only at teardown, so this\n"
      "    is not a CUDA-level leak: it names the Python lines that kept them)\n",
      format_bytes_exact(totals.leaked_bytes), count_of(totals.leaked_allocations, "block", "blocks"));
  const size_t shown = std::min(options.top, blocks.alive_at_exit.size());
  for (size_t i = 0; i < shown; ++i) {
    const LeakGroup& group = blocks.alive_at_exit[i];
    out += fmt::format("\n  #{} {} in {} {}\n", i + 1, format_bytes(group.bytes),
                       count_of(group.count, "tensor block", "tensor blocks"), named_line(group.stack, unsampled));
    if (group.stack.id != 0 || unsampled.empty()) append_call_stack(out, group.stack, options);
  }
  if (shown < blocks.alive_at_exit.size()) {
    out += fmt::format("  ... {} (--top, or --format json)\n",
                       count_of(blocks.alive_at_exit.size() - shown, "more group", "more groups"));
  }
}

}  // namespace

void append_tensor_blocks(std::string& out, const Report& report, const RenderOptions& options) {
  if (!report.tensor_blocks) return;
  const TensorBlockReport& blocks = *report.tensor_blocks;
  const Totals& totals = blocks.totals;
  out += "\nPyTorch tensors (block-level: tensor allocations inside PyTorch's cached segments, with Python stacks;\n"
         "not added to the device memory above)\n";
  out += fmt::format("  tensor blocks       {} ({} in total), {} freed\n", totals.allocations,
                     format_bytes(totals.allocated_bytes), totals.frees);
  if (totals.peak_bytes > 0) {
    out += fmt::format("  most held at once   {} at {}\n", format_bytes_exact(totals.peak_bytes),
                       format_duration(totals.peak_time_ns));
  }
  if (totals.unmatched_frees > 0) {
    out += fmt::format("  unmatched frees     {} (blocks allocated before the mode started)\n", totals.unmatched_frees);
  }
  if (blocks.overruns > 0) {
    // Only traces of schema v6, whose blocks were drained from PyTorch's memory history ring, have overruns: the
    // setting that sized that ring is gone with it, so the warning names no setting.
    out += fmt::format("warning: PyTorch's history ring overran {}: some tensor blocks are missing (a trace of an "
                       "earlier gpumemtrace, which read blocks from that ring; this one records every block as it is "
                       "allocated)\n",
                       count_of(blocks.overruns, "time", "times"));
  }
  const std::string unsampled = unsampled_block_stack_text(report.trace);
  append_block_growth(out, blocks, options, unsampled);
  append_alive_at_exit(out, blocks, options, unsampled);
}

}  // namespace gmt::analysis
