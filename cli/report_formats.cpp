#include "cli/report_formats.h"

#include <fmt/core.h>

#include <algorithm>

#include "analysis/model/snapshot.h"
#include "analysis/render/render_export.h"
#include "analysis/render/render_memory_viz.h"

namespace gmt::cli {

const std::vector<std::string>& report_formats() {
  static const std::vector<std::string> formats = {"text", "json", "html", "perfetto", "folded", "memory-viz"};
  return formats;
}

const std::vector<std::string>& folded_weights() {
  static const std::vector<std::string> weights = {"leaks", "peak"};
  return weights;
}

bool format_reads_allocations(const std::string& format) {
  return format == "memory-viz" || format == "perfetto" || format == "html";
}

std::string render_report(const analysis::Report& report, const std::string& format,
                          const analysis::RenderOptions& options, const std::string& folded_of,
                          const analysis::TraceFile* trace, const analysis::EventFilters& filters) {
  if (format == "json") return analysis::render_json(report, options);
  if (format == "html") {
    if (!trace) return analysis::render_html(report, options);
    analysis::SliceLimits limits;
    limits.max_slices = options.max_allocations;
    limits.windows = std::min<size_t>(limits.windows, std::max<size_t>(1, options.max_allocations));
    const analysis::ViewerData viewer = analysis::collect_viewer_data(*trace, filters, report, limits);
    return analysis::render_html(report, options, &viewer);
  }
  if (format == "perfetto") {
    if (!trace) return analysis::render_perfetto(report, options);
    analysis::SliceLimits limits;
    limits.max_slices = options.max_allocations;
    limits.windows = std::min<size_t>(limits.windows, std::max<size_t>(1, options.max_allocations));
    const analysis::AllocationSlices slices =
        analysis::collect_allocation_slices(*trace, filters, report.trace.duration_ns, limits);
    return analysis::render_perfetto(report, options, &slices);
  }
  if (format == "folded") {
    return analysis::render_folded(report, folded_of == "peak" ? analysis::FoldedOf::Peak : analysis::FoldedOf::Leaks);
  }
  if (format == "memory-viz" && trace) {
    const analysis::Snapshot snapshot = analysis::build_snapshot(*trace, filters);
    if (!snapshot.block_sizes_note.empty()) {
      fmt::print(stderr,
                 "gpumemtrace: memory-viz: PyTorch's blocks keep their requested sizes, not the rounded ones "
                 "its own snapshot shows: {}\n",
                 snapshot.block_sizes_note);
    }
    return analysis::render_memory_viz(snapshot);
  }
  return analysis::render_text(report, options);
}

}  // namespace gmt::cli
