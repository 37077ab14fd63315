// The JSON report. ordered_json keeps the fields in the order written here, so the document reads top-down
// like the text report; the shape is documented in render.h.
#include <nlohmann/json.hpp>

#include <algorithm>

#include "analysis/format.h"
#include "analysis/render.h"

namespace gmt::analysis {
namespace {

using Json = nlohmann::ordered_json;

template <typename T>
Json optional_value(const std::optional<T>& value) {
  return value ? Json(*value) : Json(nullptr);
}

template <typename T>
Json per_kind(const PerKind<T>& values) {
  return Json{{"device", values.device}, {"managed", values.managed}, {"host_pinned", values.host_pinned},
              {"vmm_physical", values.vmm_physical}};
}

Json stack_json(const Stack& stack) {
  Json frames = Json::array();
  for (const Frame& frame : stack.frames) {
    frames.push_back(Json{{"level", frame.level},
                          {"pc", format_pc(frame.pc)},  // hex text: JSON numbers lose precision past 2^53
                          {"function", optional_value(frame.function)},
                          {"file", optional_value(frame.file)},
                          {"line", optional_value(frame.line)},
                          {"module", optional_value(frame.module)}});
  }
  return frames;
}

template <typename Enum>
Json names(const std::vector<Enum>& values) {
  Json list = Json::array();
  for (Enum value : values) list.push_back(std::string(schema::to_string(value)));
  return list;
}

Json trace_json(const TraceInfo& trace) {
  return Json{{"path", trace.path},
              {"pid", optional_value(trace.pid)},
              {"command_line", optional_value(trace.command_line)},
              {"hostname", optional_value(trace.hostname)},
              {"backend", optional_value(trace.backend)},
              {"tool_version", optional_value(trace.tool_version)},
              {"schema_version", trace.schema_version},
              {"duration_ns", trace.duration_ns},
              {"duration_from_events", trace.duration_from_events},
              {"complete", trace.complete},
              {"simulated", trace.simulated},
              {"symbolized", trace.symbolized},
              {"dropped_events", trace.dropped_events},
              {"event_count", trace.event_count}};
}

Json totals_json(const Totals& totals) {
  return Json{{"allocations", totals.allocations},
              {"allocated_bytes", totals.allocated_bytes},
              {"frees", totals.frees},
              {"failed_allocations", totals.failed_allocations},
              {"leaked_bytes", totals.leaked_bytes},
              {"leaked_allocations", totals.leaked_allocations},
              {"peak_bytes", totals.peak_bytes},
              {"peak_time_ns", totals.peak_time_ns},
              {"unmatched_frees", totals.unmatched_frees},
              {"inconsistencies", totals.inconsistencies}};
}

Json leak_json(const LeakGroup& group, size_t rank) {
  return Json{{"rank", rank},
              {"bytes", group.bytes},
              {"count", group.count},
              {"stack_id", group.stack.id},
              {"stack_ids", group.stack_ids},
              {"stack_missing", group.stack.missing},
              {"memory_kinds", names(group.memory_kinds)},
              {"apis", names(group.apis)},
              {"devices", group.devices},
              {"first_alloc_ns", group.first_alloc_ns},
              {"last_alloc_ns", group.last_alloc_ns},
              {"stack", stack_json(group.stack)}};
}

Json failure_json(const AllocFailure& failure) {
  return Json{{"event_id", failure.event_id},
              {"time_ns", failure.time_ns},
              {"api", std::string(schema::to_string(failure.api))},
              {"memory_kind", std::string(schema::to_string(failure.memory_kind))},
              {"requested_bytes", failure.requested_bytes},
              {"error", failure.error},
              {"error_name", cuda_error_name(failure.error)},
              {"device", failure.device},
              {"device_free", optional_value(failure.device_free)},
              {"device_total", optional_value(failure.device_total)},
              {"stack_id", failure.stack.id},
              {"stack_missing", failure.stack.missing},
              {"stack", stack_json(failure.stack)}};
}

}  // namespace

std::string render_json(const Report& report, const RenderOptions& options) {
  const size_t shown = std::min(options.top, report.leaks.size());
  Json leaks = Json::array();
  for (size_t i = 0; i < shown; ++i) leaks.push_back(leak_json(report.leaks[i], i + 1));
  Json failures = Json::array();
  for (const AllocFailure& failure : report.failures) failures.push_back(failure_json(failure));

  Json document{
      {"trace", trace_json(report.trace)},
      {"totals", totals_json(report.totals)},
      {"peak_by_kind", per_kind(report.peak_by_kind)},
      {"peak_time_ns_by_kind", per_kind(report.peak_time_ns_by_kind)},
      {"leaked_by_kind", per_kind(report.leaked_by_kind)},
      {"leak_groups",
       Json{{"total", report.leak_groups_total},
            {"shown", shown},
            {"not_shown", report.leaks.size() - shown},  // cut by --top; below_min_bytes are separate
            {"below_min_bytes", report.leak_groups_below_min_bytes},
            {"bytes_below_min_bytes", report.leaked_bytes_below_min_bytes},
            {"min_bytes", optional_value(report.min_bytes)}}},
      {"leaks", std::move(leaks)},
      {"failures", std::move(failures)},
  };
  // Symbol names and paths come from the profiled binary and may not be valid UTF-8; replace bad bytes
  // rather than throw, so one odd symbol never costs the whole report.
  return document.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace gmt::analysis
