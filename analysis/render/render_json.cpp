// The JSON report. ordered_json keeps the fields in the order written here, so the document reads top-down
// like the text report; the shape is documented in render.h.
#include <nlohmann/json.hpp>

#include <algorithm>

#include "analysis/format.h"
#include "analysis/model/allocators.h"
#include "analysis/model/findings.h"
#include "analysis/model/stack_view.h"
#include "analysis/model/tensor_blocks.h"
#include "analysis/render/render.h"
#include "analysis/render/render_ci.h"
#include "analysis/render/render_json_allocators.h"
#include "analysis/render/render_json_parts.h"

namespace gmt::analysis {
namespace {

using Json = nlohmann::ordered_json;

template <typename T>
Json per_kind(const PerKind<T>& values) {
  return Json{{"device", values.device},
              {"managed", values.managed},
              {"host_pinned", values.host_pinned},
              {"vmm_physical", values.vmm_physical}};
}

Json stack_json(const Stack& stack) {
  Json frames = Json::array();
  for (const Frame& frame : stack.frames) {
    frames.push_back(
        Json{{"level", frame.level},
             {"pc", format_pc(frame.pc)},  // hex text: JSON numbers lose precision past 2^53
             {"function", optional_value(frame.function)},
             {"file", optional_value(frame.file)},
             {"line", optional_value(frame.line)},
             {"module", optional_value(frame.module)},
             {"module_offset", frame.module_offset ? Json(format_pc(*frame.module_offset)) : Json(nullptr)},
             {"python", frame.python}});
  }
  return frames;
}

template <typename Enum>
Json names(const std::vector<Enum>& values) {
  Json list = Json::array();
  for (Enum value : values) list.push_back(std::string(schema::to_string(value)));
  return list;
}

// The recorder's own time per event (TraceInfo::SelfCost), per kind; null when not measured.
Json recorder_cost_json(const TraceInfo& trace) {
  if (!trace.self_cost_cuda && !trace.self_cost_block) return nullptr;
  auto kind = [](const std::optional<TraceInfo::SelfCost>& cost) -> Json {
    if (!cost) return nullptr;
    return Json{{"ns_per_event", cost->ns_per_event}, {"events_timed", cost->events_timed}};
  };
  return Json{{"cuda_level", kind(trace.self_cost_cuda)}, {"tensor_blocks", kind(trace.self_cost_block)}};
}

Json trace_json(const TraceInfo& trace) {
  return Json{{"path", trace.path},
              {"pid", optional_value(trace.pid)},
              {"command_line", optional_value(trace.command_line)},
              {"hostname", optional_value(trace.hostname)},
              {"backend", optional_value(trace.backend)},
              {"backend_reason", optional_value(trace.backend_reason)},
              {"backend_note", optional_value(trace.backend_note)},
              {"tool_version", optional_value(trace.tool_version)},
              {"schema_version", trace.schema_version},
              {"start_monotonic_ns", optional_value(trace.start_monotonic_ns)},
              {"duration_ns", trace.duration_ns},
              {"duration_from_events", trace.duration_from_events},
              {"complete", trace.complete},
              {"stop_reason", optional_value(trace.stop_reason)},
              {"salvaged", optional_value(trace.salvaged)},
              {"missing_tables", trace.missing_tables},
              {"simulated", trace.simulated},
              {"symbolized", trace.symbolized},
              // 0: every block took its stack; otherwise a block allocation without one was not sampled (v13).
              {"block_stack_sample_bytes", trace.block_stack_sample_bytes},
              {"dropped_events", trace.dropped_events},
              {"recording_pauses", trace.recording_pauses},
              {"control_pauses", trace.control_pause_starts_ns.size()},
              {"unjudged_after_pause",
               {{"allocations", trace.unjudged_after_pause_allocations}, {"bytes", trace.unjudged_after_pause_bytes}}},
              {"recording_paused_ns", trace.recording_paused_ns},
              {"app_exit_status", optional_value(trace.app_exit_status)},
              {"app_exit_signal", optional_value(trace.app_exit_signal)},
              {"events_lost_at_exit", optional_value(trace.events_lost_at_exit)},
              {"events_after_close", optional_value(trace.events_after_close)},
              {"frees_after_close", trace.frees_after_close},
              {"supports_verdict", supports_verdict(trace)},
              {"event_count", trace.event_count},
              {"recorder_cost", recorder_cost_json(trace)}};
}

Json totals_json(const Totals& totals) {
  return Json{{"allocations", totals.allocations},
              {"allocated_bytes", totals.allocated_bytes},
              {"frees", totals.frees},
              {"failed_allocations", totals.failed_allocations},
              {"failed_attempts_in_requests", totals.failed_attempts_in_requests},
              {"block_allocations", totals.block_allocations},
              {"block_frees", totals.block_frees},
              {"leaked_bytes", totals.leaked_bytes},
              {"leaked_allocations", totals.leaked_allocations},
              {"cached_at_exit_bytes", totals.cached_at_exit_bytes},
              {"cached_at_exit_allocations", totals.cached_at_exit_allocations},
              {"peak_bytes", totals.peak_bytes},
              {"peak_time_ns", totals.peak_time_ns},
              {"unmatched_frees", totals.unmatched_frees},
              {"inconsistencies", totals.inconsistencies}};
}

Json leak_json(const LeakGroup& group, size_t rank) {
  Json leak{{"rank", rank},
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
  add_stack_view(leak, group.stack);
  return leak;
}

Json stack_bytes_json(const StackBytes& held) {
  Json item{{"bytes", held.bytes},
            {"count", held.count},
            {"stack_id", held.stack.id},
            {"stack_ids", held.stack_ids},
            {"stack_missing", held.stack.missing},
            {"stack", stack_json(held.stack)}};
  add_stack_view(item, held.stack);
  return item;
}

// The stacks a growth finding names (over time windows, or per repetition of an NVTX range): same shape.
Json growth_stacks_json(const std::vector<GrowthStack>& grown_stacks) {
  Json stacks = Json::array();
  for (const GrowthStack& grown : grown_stacks) {
    Json item{{"growth_bytes", grown.end_bytes - grown.start_bytes},
              {"start_bytes", grown.start_bytes},
              {"end_bytes", grown.end_bytes},
              {"stack_id", grown.stack.id},
              {"stack_ids", grown.stack_ids},
              {"stack_missing", grown.stack.missing},
              {"stack", stack_json(grown.stack)}};
    add_stack_view(item, grown.stack);
    stacks.push_back(std::move(item));
  }
  return stacks;
}

Json stack_bytes_list(const std::vector<StackBytes>& list) {
  Json result = Json::array();
  for (const StackBytes& held : list) result.push_back(stack_bytes_json(held));
  return result;
}

Json buckets_json(const std::vector<TimelineBucket>& buckets) {
  Json list = Json::array();
  for (const TimelineBucket& bucket : buckets) {
    list.push_back(
        Json{{"start_ns", bucket.start_ns}, {"min_bytes", bucket.min_bytes}, {"max_bytes", bucket.max_bytes}});
  }
  return list;
}

Json timeline_json(const Timeline& timeline) {
  Json series = Json::array();
  for (const TimelineSeries& one : timeline.series) {
    series.push_back(Json{{"device", one.device},
                          {"memory_kind", std::string(schema::to_string(one.memory_kind))},
                          {"buckets", buckets_json(one.buckets)}});
  }
  return Json{{"bucket_ns", timeline.bucket_ns},
              {"bucket_count", timeline.total.size()},
              {"total", buckets_json(timeline.total)},
              {"series", std::move(series)},
              {"series_not_tracked", timeline.series_not_tracked}};
}

Json peaks_json(const std::vector<DevicePeak>& peaks) {
  Json list = Json::array();
  for (const DevicePeak& peak : peaks) {
    list.push_back(Json{{"device", peak.device},
                        {"bytes", peak.bytes},
                        {"time_ns", peak.time_ns},
                        {"stack_groups", peak.stack_groups},
                        {"held_bytes", optional_value(peak.held_bytes)},
                        {"held_time_ns", peak.held_bytes ? Json(peak.held_time_ns) : Json(nullptr)},
                        {"stacks", stack_bytes_list(peak.stacks)}});
  }
  return list;
}

Json allocators_json(const std::vector<LeakGroup>& leaks) {
  Json list = Json::array();
  for (const AllocatorFinding& allocator : name_allocators(leaks)) {
    list.push_back(Json{{"id", allocator.id},
                        {"name", allocator.name},
                        {"leaked_bytes", allocator.leaked_bytes},
                        {"leaked_allocations", allocator.leaked_allocations},
                        {"leak_groups", allocator.leak_groups},
                        {"advice", allocator.advice}});
  }
  return list;
}

Json growth_json(const Growth& growth) {
  Json devices = Json::array();
  for (const GrowthDevice& device : growth.devices) {
    devices.push_back(Json{{"device", device.device},
                           {"low_watermarks", device.low_watermarks},
                           {"slope_bytes_per_s", device.slope_bytes_per_s},
                           {"fitted_rise_bytes", device.fitted_rise_bytes},
                           {"threshold_bytes", device.threshold_bytes},
                           {"rising_steps", device.rising_steps},
                           {"falling_steps", device.falling_steps},
                           {"steps", device.steps},
                           {"growing", device.growing},
                           {"first_window", device.first_window}});
  }
  Json findings = Json::array();
  for (const GrowthFinding& finding : growth.findings) {
    Json stacks = growth_stacks_json(finding.stacks);
    Json projection = nullptr;
    if (finding.device_total_bytes) {
      projection = Json{{"device_total_bytes", *finding.device_total_bytes},
                        {"seconds_until_full", optional_value(finding.seconds_until_full)}};
    }
    findings.push_back(Json{{"device", finding.device},
                            {"rate_bytes_per_s", finding.rate_bytes_per_s},
                            {"start_time_ns", finding.start_time_ns},
                            {"end_time_ns", finding.end_time_ns},
                            {"start_low_bytes", finding.start_low_bytes},
                            {"end_low_bytes", finding.end_low_bytes},
                            {"late_start", finding.late_start},
                            {"projection", std::move(projection)},
                            {"growing_stack_groups", finding.growing_stack_groups},
                            {"stacks", std::move(stacks)}});
  }
  return Json{{"analyzed", growth.analyzed},   {"reason", growth.reason.empty() ? Json(nullptr) : Json(growth.reason)},
              {"windows", growth.windows},     {"window_ns", growth.window_ns},
              {"start_ns", growth.start_ns},   {"end_ns", growth.end_ns},
              {"devices", std::move(devices)}, {"findings", std::move(findings)}};
}

Json failure_json(const AllocFailure& failure) {
  Json item{
      {"event_id", failure.event_id},
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
      {"stack", stack_json(failure.stack)},
      {"label", failure.label},
      {"largest_free_gap", failure.fragmentation ? Json(failure.fragmentation->largest_gap_bytes) : Json(nullptr)},
      {"fragmentation", fragmentation_json(failure.fragmentation)},
      {"top_stacks", stack_bytes_list(failure.top_stacks)},
      {"allocator", optional_text(failure.allocator)},
      {"heap", heap_space_json(failure.heap)},
      {"thread_id", failure.thread_id}};
  if (failure.heap_source) {  // a framework's request: the CUDA-level attempts inside it (failed_requests.h)
    Json attempts = Json::array();
    for (const AllocFailure& attempt : failure.attempts) attempts.push_back(failure_json(attempt));
    item["attempts"] = std::move(attempts);
    item["segments_released"] = failure.segments_released;
    item["segment_bytes_released"] = failure.segment_bytes_released;
  }
  add_stack_view(item, failure.stack);
  return item;
}

// NVTX ranges and filters (ranges.h, filters.h).

Json range_growth_json(const RangeGrowth& range) {
  Json stacks = growth_stacks_json(range.stacks);
  return Json{{"name", range.name},
              {"domain", optional_text(range.domain)},
              {"iterations", range.iterations},
              {"bytes_per_iteration", range.bytes_per_iteration},
              {"live_bytes_at_end", range.live_bytes_at_end},
              {"fitted_rise_bytes", range.fitted_rise_bytes},
              {"threshold_bytes", range.threshold_bytes},
              {"rising_steps", range.rising_steps},
              {"falling_steps", range.falling_steps},
              {"steps", range.steps},
              {"growing", range.growing},
              {"growing_stack_groups", range.growing_stack_groups},
              {"stacks", std::move(stacks)}};
}

Json ranges_json(const RangeReport& ranges) {
  Json by_name = Json::array();
  for (const RangeStats& range : ranges.by_name) {
    by_name.push_back(Json{{"name", range.name},
                           {"domain", optional_text(range.domain)},
                           {"none", range.none},
                           {"repetitions", range.repetitions},
                           {"allocations", range.allocations},
                           {"allocated_bytes", range.allocated_bytes},
                           {"frees", range.frees},
                           {"freed_bytes", range.freed_bytes},
                           {"live_allocations", range.live_allocations},
                           {"live_bytes", range.live_bytes},
                           {"peak_live_bytes", range.peak_live_bytes}});
  }
  Json repeated = Json::array();
  for (const RangeGrowth& range : ranges.repeated) repeated.push_back(range_growth_json(range));
  Json growth = Json::array();
  for (const RangeGrowth& range : ranges.growth) growth.push_back(range_growth_json(range));
  return Json{{"available", ranges.available},
              {"range_count", ranges.range_count},
              {"by_name", std::move(by_name)},
              {"repeated", std::move(repeated)},
              {"growth", std::move(growth)}};
}

Json range_spans_json(const std::vector<RangeSpan>& spans) {
  Json list = Json::array();
  for (const RangeSpan& span : spans) {
    list.push_back(Json{{"name", span.name},
                        {"domain", optional_text(span.domain)},
                        {"thread_id", span.thread_id},
                        {"start_ns", span.start_ns},
                        {"end_ns", optional_value(span.end_ns)},
                        {"depth", span.depth}});
  }
  return list;
}

Json filters_json(const FilterSummary& summary) {
  const EventFilters& filters = summary.filters;
  return Json{{"device", optional_value(filters.device)},
              {"since_ns", optional_value(filters.since_ns)},
              {"until_ns", optional_value(filters.until_ns)},
              {"since_snapshot", optional_value(filters.since_snapshot)},
              {"until_snapshot", optional_value(filters.until_snapshot)},
              {"pid", optional_value(filters.pid)},
              {"min_size", optional_value(filters.min_size)},
              {"range", optional_value(filters.range)},
              {"allocations_matched", summary.allocations_matched},
              {"allocations_seen", summary.allocations_seen},
              {"nothing_matched", optional_text(summary.nothing_matched)}};
}

// The block-level section: null without the mode. Every stack gets "python_line" (file:function:line of the
// frame that names the app's line: analysis/model/tensor_blocks.h).
Json tensor_blocks_json(const std::optional<TensorBlockReport>& blocks, const RenderOptions& options) {
  if (!blocks) return Json(nullptr);
  const size_t shown = std::min(options.top, blocks->alive_at_exit.size());
  Json alive = Json::array();
  for (size_t i = 0; i < shown; ++i) {
    const LeakGroup& group = blocks->alive_at_exit[i];
    alive.push_back(leak_json(group, i + 1));
    alive.back()["python_line"] = python_line(group.stack);
  }
  Json growth = growth_json(blocks->growth);
  for (size_t f = 0; f < blocks->growth.findings.size(); ++f) {
    const GrowthFinding& finding = blocks->growth.findings[f];
    for (size_t i = 0; i < finding.stacks.size(); ++i) {
      growth["findings"][f]["stacks"][i]["python_line"] = python_line(finding.stacks[i].stack);
    }
  }
  Json range_growth = Json::array();
  for (const RangeGrowth& range : blocks->range_growth) {
    Json one = range_growth_json(range);
    for (size_t i = 0; i < range.stacks.size(); ++i)
      one["stacks"][i]["python_line"] = python_line(range.stacks[i].stack);
    range_growth.push_back(std::move(one));
  }
  return Json{{"overruns", blocks->overruns},
              {"totals", totals_json(blocks->totals)},
              {"alive_groups", Json{{"total", blocks->alive_groups_total},
                                    {"shown", shown},
                                    {"below_min_bytes", blocks->alive_groups_below_min_bytes}}},
              {"alive_at_exit", std::move(alive)},
              {"peak_stacks", peaks_json(blocks->peaks)},
              {"growth", std::move(growth)},
              {"range_growth", std::move(range_growth)}};
}

}  // namespace

Json call_stack_json(const Stack& stack) { return stack_json(stack); }

Json fragmentation_json(const std::optional<FragmentationStats>& stats) {
  if (!stats) return Json(nullptr);
  return Json{{"time_ns", stats->time_ns},
              {"allocations", stats->allocations},
              {"span_bytes", stats->span_bytes},
              {"free_bytes", stats->free_bytes},
              {"largest_gap_bytes", stats->largest_gap_bytes},
              {"ratio", stats->ratio}};
}

// Beside every stack[]: the user's frame and the stack as the text report shows it (analysis/model/stack_view.h), for
// readers that want the answer rather than every frame (the HTML page).
void add_stack_view(Json& item, const Stack& stack) {
  const Frame* user = user_frame(stack);
  item["user_frame"] = user ? Json(frame_label(*user)) : Json(nullptr);
  item["stack_view"] = stack_view_lines(stack, StackViewOptions{.max_lines = 0});
}

Json optional_text(const std::string& text) { return text.empty() ? Json(nullptr) : Json(text); }

// The answer first (analysis/model/findings.h), largest first, every finding.
Json findings_json(const Report& report) {
  Json list = Json::array();
  for (const Finding& finding : findings_of(report)) {
    list.push_back(Json{{"kind", std::string(to_string(finding.kind))},
                        {"bytes", finding.bytes},
                        {"verdict", finding.verdict},
                        {"detail", optional_text(finding.detail)},
                        {"user_frame", optional_text(finding.user_frame)},
                        {"during", optional_text(finding.during)},
                        {"source_text", optional_text(finding.source_text)},
                        {"via", optional_text(finding.via)},
                        {"stack_id", finding.stack_id}});
  }
  return list;
}

std::string render_json(const Report& report, const RenderOptions& options) {
  const size_t shown = std::min(options.top, report.leaks.size());
  Json leaks = Json::array();
  for (size_t i = 0; i < shown; ++i) {
    leaks.push_back(leak_json(report.leaks[i], i + 1));
    // The app's Python line (tensor_blocks.h), for a group allocated from Python: where a tensor was made.
    const Frame* app = app_python_frame(report.leaks[i].stack);
    leaks.back()["python_line"] = app && app->python ? Json(python_line(report.leaks[i].stack)) : Json(nullptr);
    // Made by autograd's worker threads during a backward() call: that call's line (report.h LeakGroup).
    const LeakGroup& group = report.leaks[i];
    Json during = nullptr;
    if (group.backward_stack_id != 0) {
      during =
          Json{{"call", "backward"},
               {"caller_known", group.backward_stack_id > 0},
               {"stack_id", group.backward_stack_id > 0 ? Json(group.backward_stack_id) : Json(nullptr)},
               {"python_line", group.backward_stack_id > 0 ? Json(python_line(group.backward_stack)) : Json(nullptr)},
               {"stack", group.backward_stack_id > 0 ? stack_json(group.backward_stack) : Json::array()}};
    }
    leaks.back()["during"] = std::move(during);
  }
  Json failures = Json::array();
  for (const AllocFailure& failure : report.failures) failures.push_back(failure_json(failure));

  Json document{
      {"trace", trace_json(report.trace)},
      {"findings", findings_json(report)},
      {"devices", devices_json(report.devices)},
      {"cross_check", cross_check_json(report)},
      {"aggregate", aggregate_json(report)},
      {"filters", filters_json(report.filters)},
      {"totals", totals_json(report.totals)},
      {"peak_by_kind", per_kind(report.peak_by_kind)},
      {"peak_time_ns_by_kind", per_kind(report.peak_time_ns_by_kind)},
      {"leaked_by_kind", per_kind(report.leaked_by_kind)},
      {"leak_groups", Json{{"total", report.leak_groups_total},
                           {"shown", shown},
                           {"not_shown", report.leaks.size() - shown},  // cut by --top; below_min_bytes are separate
                           {"below_min_bytes", report.leak_groups_below_min_bytes},
                           {"bytes_below_min_bytes", report.leaked_bytes_below_min_bytes},
                           {"min_bytes", optional_value(report.min_bytes)}}},
      {"leaks", std::move(leaks)},
      {"cached_at_exit", cached_at_exit_json(report)},
      {"imported", imported_json(report.imported)},
      {"allocators", allocators_json(report.leaks)},
      {"suppressed", suppressed_json(report)},  // CI sections: render_ci.cpp
      {"failures", std::move(failures)},
      {"peak_stacks", peaks_json(report.peaks)},
      {"growth", growth_json(report.growth)},
      {"fragmentation", device_fragmentation_json(report.fragmentation)},
      {"heap_fragmentation", heap_fragmentation_json(report.heap_fragmentation)},
      {"pools", pools_json(report.pools)},
      {"allocator_stats", allocator_stats_json(report, stack_bytes_list)},
      {"ranges", ranges_json(report.ranges)},
      {"range_spans", range_spans_json(report.range_spans)},
      {"range_spans_left_out", report.range_spans_left_out},
      {"breakdown", breakdown_json(report.breakdown)},
      {"tensor_blocks", tensor_blocks_json(report.tensor_blocks, options)},
      {"timeline", timeline_json(report.timeline)},  // last: the longest part
  };
  // Symbol names and paths come from the profiled binary and may not be valid UTF-8; replace bad bytes
  // rather than throw, so one odd symbol never costs the whole report.
  return document.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace gmt::analysis
