// The HTML report: the page of analysis/render/assets/report.html (html_template.h) with the Report's JSON embedded,
// plus a header written here so that the essentials read even without the script.
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

#include "analysis/format.h"
#include "analysis/model/tensor_blocks.h"
#include "analysis/render/html_template.h"
#include "analysis/render/html_text.h"
#include "analysis/render/render_export.h"
#include "analysis/render/render_viewer.h"

namespace gmt::analysis {
namespace {

using Json = nlohmann::ordered_json;

// The Report as render_json writes it, with the unbounded lists cut (failures, ranges; leaks by --top).
Json page_data(const Report& report, const RenderOptions& options) {
  Json data = Json::parse(render_json(report, options));
  Json& failures = data["failures"];
  size_t not_shown = 0;
  if (failures.size() > kMaxExportedFailures) {
    not_shown = failures.size() - kMaxExportedFailures;
    failures.erase(failures.begin() + static_cast<std::ptrdiff_t>(kMaxExportedFailures), failures.end());
  }
  data["failures_not_shown"] = not_shown;
  // NVTX range spans, when the JSON report carries them: the earliest kMaxExportedRanges are drawn.
  if (data.contains("range_spans") && data["range_spans"].is_array()) {
    Json& ranges = data["range_spans"];
    size_t ranges_not_shown = 0;
    if (ranges.size() > kMaxExportedRanges) {
      ranges_not_shown = ranges.size() - kMaxExportedRanges;
      ranges.erase(ranges.begin() + static_cast<std::ptrdiff_t>(kMaxExportedRanges), ranges.end());
    }
    data["range_spans_not_shown"] = ranges_not_shown;
  }
  return data;
}

std::string meta_row(const std::string& name, const std::string& value) {
  return fmt::format("<tr><td>{}</td><td>{}</td></tr>\n", html_escape(name), html_escape(value));
}

// The block-level mode's findings as a plain list (the page's script draws the CUDA-level sections; blocks never
// join those): growth by Python line, then the tensors alive at exit.
std::string tensor_blocks_html(const Report& report) {
  if (!report.tensor_blocks) return "";
  const TensorBlockReport& blocks = *report.tensor_blocks;
  std::string out = "\n<section id=\"tensor-blocks\">\n<h2>PyTorch tensors (block-level)</h2>\n";
  out += fmt::format("<p>{} tensor blocks ({}), {} freed; most held at once {}. Inside PyTorch's cached segments: "
                     "not added to device memory.</p>\n",
                     blocks.totals.allocations, html_escape(format_bytes(blocks.totals.allocated_bytes)),
                     blocks.totals.frees, html_escape(format_bytes_exact(blocks.totals.peak_bytes)));
  if (blocks.overruns > 0) {
    out += fmt::format("<p class=\"warning\">PyTorch's history ring overran {} times: some blocks are missing.</p>\n",
                       blocks.overruns);
  }
  out += "<ul class=\"tensor-growth\">\n";
  for (const GrowthFinding& finding : blocks.growth.findings) {
    for (const GrowthStack& grown : finding.stacks) {
      out += fmt::format("<li>grows on device {}: +{} at {}</li>\n", finding.device,
                         html_escape(format_bytes(grown.end_bytes - grown.start_bytes)),
                         html_escape(python_line(grown.stack)));
    }
  }
  for (const RangeGrowth& range : blocks.range_growth) {
    for (const GrowthStack& grown : range.stacks) {
      out += fmt::format("<li>grows per repetition of '{}': +{} at {}</li>\n", html_escape(range.name),
                         html_escape(format_bytes(grown.end_bytes - grown.start_bytes)),
                         html_escape(python_line(grown.stack)));
    }
  }
  out += "</ul>\n<h3>Tensors alive at exit</h3>\n<ul class=\"tensor-alive\">\n";
  for (const LeakGroup& group : blocks.alive_at_exit) {
    out += fmt::format("<li>{} in {} blocks at {}</li>\n", html_escape(format_bytes(group.bytes)), group.count,
                       html_escape(python_line(group.stack)));
  }
  return out + "</ul>\n</section>\n";
}

std::string header(const Report& report) {
  const TraceInfo& trace = report.trace;
  const Totals& totals = report.totals;
  std::string out = "<header>\n<h1>gpumemtrace report</h1>\n";
  if (trace.simulated) {
    out += "<p class=\"simulated\">Recorded under the SIMULATED CUDA runtime (a test fixture): no GPU was used.</p>\n";
  }
  out += "<table class=\"meta\" id=\"trace-info\">\n";
  out += meta_row("trace", trace.path);
  if (trace.command_line) out += meta_row("command line", *trace.command_line);
  if (trace.hostname) out += meta_row("host", *trace.hostname);
  if (trace.pid) out += meta_row("pid", std::to_string(*trace.pid));
  for (const DeviceInfo& device : report.devices) {
    out += meta_row("device " + std::to_string(device.ordinal), describe_device(report.devices, device.ordinal));
  }
  out += meta_row("duration", format_duration(trace.duration_ns) + (trace.complete ? "" : " (incomplete trace)"));
  out += meta_row("events", std::to_string(trace.event_count));
  out += meta_row("allocations",
                  fmt::format("{} ({}), {} freed, {} failed", totals.allocations, format_bytes(totals.allocated_bytes),
                              totals.frees, totals.failed_allocations));
  out += meta_row("peak",
                  fmt::format("{} at {}", format_bytes_exact(totals.peak_bytes), format_duration(totals.peak_time_ns)));
  out += meta_row("leaked", fmt::format("{} in {} allocation{}", format_bytes_exact(totals.leaked_bytes),
                                        totals.leaked_allocations, totals.leaked_allocations == 1 ? "" : "s"));
  for (const HeapAtExit& heap : report.heaps) {  // framework heaps (heaps.h): their reservation, apart
    out += meta_row(heap.cached() ? "cached at exit" : "reserved at exit",
                    fmt::format("{} by {}{}", format_bytes_exact(heap.reserved_bytes), heap.allocator,
                                heap.opaque     ? " (not a leak; no verdict on JAX's buffers in it: " + heap.note + ")"
                                : heap.cached() ? " (not a leak)"
                                                : ", blocks not recorded (" + heap.note + ")"));
  }
  if (report.imported.any()) {
    out += meta_row("imported",
                    fmt::format("{} peak from other processes (not counted above), {} IPC handles left open",
                                format_bytes_exact(report.imported.peak_bytes), report.imported.left_open_handles));
  }
  out += "</table>\n</header>";
  return out + tensor_blocks_html(report);
}

}  // namespace

std::string render_html(const Report& report, const RenderOptions& options, const ViewerData* viewer) {
  const std::string title =
      "gpumemtrace: " + (report.trace.command_line ? *report.trace.command_line : report.trace.path);
  const std::string data =
      script_safe_json(page_data(report, options).dump(-1, ' ', false, Json::error_handler_t::replace));
  const std::string viewer_data = script_safe_json(
      viewer ? viewer_json(report, *viewer, options).dump(-1, ' ', false, Json::error_handler_t::replace) : "null");

  const std::string escaped_title = html_escape(title);
  const std::string header_html = header(report);
  return fill_html_slots(html_report_template(), {{kHtmlTitleSlot, escaped_title},
                                                  {kHtmlHeaderSlot, header_html},
                                                  {kHtmlDataSlot, data},
                                                  {kHtmlViewerDataSlot, viewer_data},
                                                  {kHtmlD3Slot, script_text(d3_script())},
                                                  {kHtmlViewerScriptSlot, script_text(viewer_script())}});
}

}  // namespace gmt::analysis
