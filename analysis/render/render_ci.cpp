#include "analysis/render/render_ci.h"

#include <fmt/core.h>

#include <algorithm>

#include "analysis/format.h"

namespace gmt::analysis {
namespace {

using Json = nlohmann::ordered_json;

std::string plural(uint64_t count, const char* singular, const char* plural_form) {
  return fmt::format("{} {}", count, count == 1 ? singular : plural_form);
}

std::string thread_name(const BreakdownRow& row, const Report& report) {
  if (report.trace.pid && *report.trace.pid == row.id) return fmt::format("thread {} (main)", row.id);
  return fmt::format("thread {}", row.id);
}

std::string stream_name(const BreakdownRow& row) {
  if (row.id == 0) return "stream 0 (default)";
  return "stream " + format_pc(static_cast<uint64_t>(row.id));
}

std::string module_name(const BreakdownRow& row) {
  return row.label ? fmt::format("{} ({})", row.module, *row.label) : row.module;
}

template <typename NameFn>
void append_table(std::string& out, const char* title, const std::vector<BreakdownRow>& rows, NameFn name) {
  if (rows.size() < 2) return;  // one row repeats the totals
  const size_t shown = std::min(kTextBreakdownRows, rows.size());
  out += rows.size() > shown ? fmt::format("  {} (top {} of {})\n", title, shown, rows.size())
                             : fmt::format("  {}\n", title);
  for (size_t i = 0; i < shown; ++i) {
    const BreakdownRow& row = rows[i];
    out += fmt::format("    {:<32} {:>11} {:>11} {:>11} {:>8}\n", name(row), format_bytes(row.peak_bytes),
                       format_bytes(row.allocated_bytes), format_bytes(row.leaked_bytes), row.allocations);
  }
}

Json row_json(const BreakdownRow& row, Json identity) {
  identity["allocations"] = row.allocations;
  identity["allocated_bytes"] = row.allocated_bytes;
  identity["leaked_bytes"] = row.leaked_bytes;
  identity["peak_bytes"] = row.peak_bytes;
  return identity;
}

}  // namespace

void append_suppressed(std::string& out, const Report& report) {
  if (report.suppressed.empty()) return;
  uint64_t bytes = 0;
  uint64_t count = 0;
  for (const SuppressedLeaks& rule : report.suppressed) {
    bytes += rule.bytes;
    count += rule.count;
  }
  out += fmt::format("\nSuppressed leaks ({} in {}, left out of the leaks and totals above)\n",
                     format_bytes_exact(bytes), plural(count, "allocation", "allocations"));
  for (const SuppressedLeaks& rule : report.suppressed) {
    if (rule.count == 0) {
      out += fmt::format("  {}  unused: matched no leak ({})\n", rule.rule, rule.origin);
    } else {
      out += fmt::format("  {}  {} in {} from {} ({})\n", rule.rule, format_bytes_exact(rule.bytes),
                         plural(rule.count, "allocation", "allocations"),
                         plural(rule.groups, "call stack", "call stacks"), rule.origin);
    }
  }
}

void append_breakdown(std::string& out, const Report& report) {
  const Breakdown& breakdown = report.breakdown;
  // A table of one row (one thread, one stream, one module) repeats the totals: only the others are shown,
  // and no section when none is left (JSON keeps every table).
  if (breakdown.by_thread.size() < 2 && breakdown.by_stream.size() < 2 && breakdown.by_module.size() < 2) return;
  out += "\nBreakdown (live at the peak, allocated in total, leaked, allocations)\n";
  out += fmt::format("    {:<32} {:>11} {:>11} {:>11} {:>8}\n", "", "at peak", "allocated", "leaked", "count");
  append_table(out, "by thread", breakdown.by_thread,
               [&report](const BreakdownRow& row) { return thread_name(row, report); });
  append_table(out, "by stream", breakdown.by_stream, stream_name);
  append_table(out, "by module (the innermost frame outside the CUDA libraries)", breakdown.by_module, module_name);
}

Json suppressed_json(const Report& report) {
  Json list = Json::array();
  for (const SuppressedLeaks& rule : report.suppressed) {
    list.push_back(Json{{"rule", rule.rule},
                        {"origin", rule.origin},
                        {"bytes", rule.bytes},
                        {"count", rule.count},
                        {"groups", rule.groups},
                        {"used", rule.count > 0}});
  }
  return list;
}

Json breakdown_json(const Breakdown& breakdown) {
  Json threads = Json::array();
  for (const BreakdownRow& row : breakdown.by_thread) threads.push_back(row_json(row, Json{{"thread", row.id}}));
  Json streams = Json::array();
  for (const BreakdownRow& row : breakdown.by_stream) {
    streams.push_back(row_json(row, Json{{"stream", format_pc(static_cast<uint64_t>(row.id))}}));
  }
  Json modules = Json::array();
  for (const BreakdownRow& row : breakdown.by_module) {
    modules.push_back(row_json(row, Json{{"module", row.module},
                                         {"path", row.module_path.empty() ? Json(nullptr) : Json(row.module_path)},
                                         {"label", row.label ? Json(*row.label) : Json(nullptr)}}));
  }
  return Json{{"by_thread", std::move(threads)}, {"by_stream", std::move(streams)}, {"by_module", std::move(modules)}};
}

}  // namespace gmt::analysis
