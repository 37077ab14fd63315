#include "analysis/render/render_json_allocators.h"
#include "analysis/render/render_json_parts.h"

namespace gmt::analysis {
namespace {

using Json = nlohmann::ordered_json;

Json sample_json(const AllocatorSample& s) {
  return Json{{"time_ns", s.time_ns},
              {"trigger", std::string(schema::to_string(s.trigger))},
              {"in_use_bytes", s.in_use_bytes},
              {"reserved_bytes", s.reserved_bytes},
              {"inactive_split_bytes", optional_value(s.inactive_split_bytes)},
              {"alloc_retries", optional_value(s.alloc_retries)},
              {"ooms", optional_value(s.ooms)},
              {"request_bytes", optional_value(s.request_bytes)}};
}

Json device_json(const AllocatorDevice& d) {
  Json triggers = Json::object();
  for (int t = 1; t <= schema::kMaxSampleTrigger; ++t) {
    triggers[std::string(schema::to_string(static_cast<schema::SampleTrigger>(t)))] = d.samples_by_trigger[t];
  }
  Json series = Json::array();
  for (const AllocatorSample& s : d.series) series.push_back(sample_json(s));
  return Json{
      {"device", d.device},
      {"allocator", d.allocator_id},
      {"allocator_name", d.allocator_name},
      {"samples", d.samples},
      {"samples_by_trigger", std::move(triggers)},
      {"peak_in_use_bytes", d.peak_in_use_bytes},
      {"peak_in_use_time_ns", d.peak_in_use_time_ns},
      {"peak_reserved_bytes", d.peak_reserved_bytes},
      {"peak_reserved_time_ns", d.peak_reserved_time_ns},
      {"peak_cached_bytes", d.peak_cached_bytes},
      {"peak_cached_time_ns", d.peak_cached_time_ns},
      {"peak_inactive_split_bytes", optional_value(d.peak_inactive_split_bytes)},
      {"peak_inactive_split_time_ns", d.peak_inactive_split_bytes ? Json(d.peak_inactive_split_time_ns) : Json()},
      {"reserved_at_peak_inactive_split_bytes",
       d.peak_inactive_split_bytes ? Json(d.reserved_at_peak_inactive_split_bytes) : Json()},
      {"alloc_retries", optional_value(d.alloc_retries)},
      {"ooms", optional_value(d.ooms)},
      {"in_use_at_end_bytes", d.last.in_use_bytes},
      {"reserved_at_end_bytes", d.last.reserved_bytes},
      {"cached_at_end_bytes", d.cached_at_end_bytes},
      {"cache", cache_explanation(d.allocator)},
      {"fragmented", d.fragmented},
      {"advice", d.advice.empty() ? Json() : Json(d.advice)},
      {"series", std::move(series)},
      {"series_left_out", d.series_left_out}};
}

}  // namespace

Json allocator_stats_json(const Report& report, const std::function<Json(const std::vector<StackBytes>&)>& stacks) {
  if (!report.allocator_stats) return Json();
  const AllocatorStats& stats = *report.allocator_stats;
  Json devices = Json::array();
  for (const AllocatorDevice& d : stats.devices) devices.push_back(device_json(d));
  Json ooms = Json::array();
  for (const AllocatorOom& oom : stats.ooms) {
    ooms.push_back(Json{{"time_ns", oom.time_ns},
                        {"device", oom.device},
                        {"allocator", allocator_id(oom.allocator)},
                        {"request_bytes", optional_value(oom.sample.request_bytes)},
                        {"in_use_bytes", oom.sample.in_use_bytes},
                        {"reserved_bytes", oom.sample.reserved_bytes},
                        {"inactive_split_bytes", optional_value(oom.sample.inactive_split_bytes)},
                        {"alloc_retries", optional_value(oom.sample.alloc_retries)},
                        {"ooms", optional_value(oom.sample.ooms)},
                        {"cuda_failure_event_id", optional_value(oom.cuda_failure_event_id)},
                        {"device_free", optional_value(oom.device_free_bytes)},
                        {"device_total", optional_value(oom.device_total_bytes)},
                        {"cuda_live_bytes", oom.cuda_live_bytes},
                        {"stack_groups", oom.stack_groups},
                        {"top_stacks", stacks(oom.top_stacks)}});
  }
  return Json{{"samples", stats.samples}, {"devices", std::move(devices)}, {"ooms", std::move(ooms)}};
}

}  // namespace gmt::analysis
