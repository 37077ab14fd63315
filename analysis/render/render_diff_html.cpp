// `gpumemtrace diff --format html`: the diff (diff.h) as one self-contained page, analysis/render/assets/diff.html
// (html_template.h) with the diff's data embedded as JSON and d3 inlined. A header written here with the figures
// (peaks, leaked bytes, regressions) reads without the script; the script draws both runs' memory over time on one
// time axis and the table of call stacks that are new, gone, grew or shrank.
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

#include "analysis/format.h"
#include "analysis/model/stack_view.h"
#include "analysis/render/html_template.h"
#include "analysis/render/html_text.h"
#include "analysis/render/render_export.h"

namespace gmt::analysis {
namespace {

using Json = nlohmann::ordered_json;

// Stacks in the page's table, the largest changes first; the rest are counted.
constexpr size_t kMaxDiffStacks = 1000;

std::string signed_bytes_exact(int64_t delta) {
  if (delta == 0) return "0 B";
  const uint64_t magnitude = delta > 0 ? static_cast<uint64_t>(delta) : 0 - static_cast<uint64_t>(delta);
  return (delta > 0 ? "+" : "-") + format_bytes_exact(magnitude);
}

uint64_t magnitude(int64_t delta) {
  return delta >= 0 ? static_cast<uint64_t>(delta) : 0 - static_cast<uint64_t>(delta);
}

// One run: what it is and its live bytes over time (the report's envelope of every device and kind).
Json run_json(const Report& report) {
  Json run;
  run["path"] = report.trace.path;
  run["command"] = report.trace.command_line ? Json(*report.trace.command_line) : Json(nullptr);
  run["duration_ns"] = report.trace.duration_ns;
  run["peak_bytes"] = report.totals.peak_bytes;
  run["peak_time_ns"] = report.totals.peak_time_ns;
  run["bucket_ns"] = report.timeline.bucket_ns;
  Json buckets = Json::array();
  for (const TimelineBucket& bucket : report.timeline.total) {
    buckets.push_back(Json::array({bucket.start_ns, bucket.min_bytes, bucket.max_bytes}));
  }
  run["buckets"] = std::move(buckets);  // [start_ns, least, most live bytes]
  return run;
}

Json stacks_json(const TraceDiff& diff, size_t& not_shown) {
  std::vector<const LeakDiff*> order;
  for (const LeakDiff& leak : diff.leaks) order.push_back(&leak);
  std::stable_sort(order.begin(), order.end(),
                   [](const LeakDiff* a, const LeakDiff* b) { return magnitude(a->delta()) > magnitude(b->delta()); });
  not_shown = order.size() > kMaxDiffStacks ? order.size() - kMaxDiffStacks : 0;
  order.resize(std::min(order.size(), kMaxDiffStacks));
  StackViewOptions view;  // the panel's stack: every frame, names as recorded (the table has the short user frame)
  view.max_lines = 0;
  view.full_names = true;
  Json stacks = Json::array();
  for (const LeakDiff* leak : order) {
    const Frame* user = user_frame(leak->stack);
    stacks.push_back(Json{{"status", to_string(leak->status)},
                          {"delta_bytes", leak->delta()},
                          {"base_bytes", leak->base_bytes},
                          {"new_bytes", leak->new_bytes},
                          {"base_count", leak->base_count},
                          {"new_count", leak->new_count},
                          {"regression", leak->regression},
                          {"user", user ? Json(frame_label(*user)) : Json(nullptr)},
                          {"lines", stack_view_lines(leak->stack, view)}});
  }
  return stacks;
}

std::string peak_row(const std::string& name, const PeakDiff& peak) {
  return fmt::format(
      "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>\n",
      html_escape(name), html_escape(format_bytes_exact(peak.base_bytes)),
      html_escape(format_bytes_exact(peak.new_bytes)), html_escape(signed_bytes_exact(peak.delta())),
      peak.regression ? "REGRESSION" : "");
}

std::string header(const TraceDiff& diff, const Report& base, const Report& next) {
  std::string out = "<header>\n<h1>gpumemtrace diff</h1>\n";
  if (base.trace.simulated || next.trace.simulated) {
    out += "<p class=\"simulated\">Recorded under the SIMULATED CUDA runtime (a test fixture): no GPU was used.</p>\n";
  }
  out += "<table class=\"meta\" id=\"diff-runs\">\n";
  for (const auto& [name, report] : {std::pair<const char*, const Report*>{"base", &base}, {"new", &next}}) {
    const TraceInfo& trace = report->trace;
    out += fmt::format("<tr><td>{}</td><td><code>{}</code>{}</td></tr>\n", name, html_escape(trace.path),
                       trace.command_line ? " " + html_escape(*trace.command_line) : std::string());
  }
  out += "</table>\n<table id=\"diff-peaks\">\n<tr><th></th><th class=\"num\">base</th><th class=\"num\">new</th>"
         "<th class=\"num\">change</th><th></th></tr>\n";
  out += peak_row("peak", diff.total_peak);
  for (const PeakDiff& peak : diff.device_peaks) {
    out += peak_row(
        peak.device && *peak.device < 0 ? "peak, host memory" : fmt::format("peak, device {}", *peak.device), peak);
  }
  out += peak_row("leaked", diff.leaked);
  out += "</table>\n";
  if (diff.regressions.empty()) {
    out += "<p id=\"diff-verdict\">No regression.</p>\n";
  } else {
    out += fmt::format("<p id=\"diff-verdict\" class=\"warning\">{} regression{}:</p>\n<ul id=\"diff-regressions\">\n",
                       diff.regressions.size(), diff.regressions.size() == 1 ? "" : "s");
    for (const std::string& regression : diff.regressions) out += "<li>" + html_escape(regression) + "</li>\n";
    out += "</ul>\n";
  }
  return out + "</header>";
}

}  // namespace

std::string render_diff_html(const TraceDiff& diff, const Report& base, const Report& next) {
  size_t stacks_not_shown = 0;
  Json data;
  data["base"] = run_json(base);
  data["new"] = run_json(next);
  data["stacks"] = stacks_json(diff, stacks_not_shown);
  data["stacks_not_shown"] = stacks_not_shown;
  const std::string data_text = script_safe_json(data.dump(-1, ' ', false, Json::error_handler_t::replace));
  const std::string title = html_escape("gpumemtrace diff: " + diff.base_path + " -> " + diff.new_path);
  const std::string header_html = header(diff, base, next);

  return fill_html_slots(html_diff_template(), {{kHtmlTitleSlot, title},
                                                {kHtmlHeaderSlot, header_html},
                                                {kHtmlDiffDataSlot, data_text},
                                                {kHtmlD3Slot, script_text(d3_script())}});
}

}  // namespace gmt::analysis
