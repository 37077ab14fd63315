// Chrome trace-event JSON (the "JSON Object Format" of the Trace Event Format document), which
// ui.perfetto.dev and chrome://tracing both load. Times are microseconds since the process start.
//
// Tracks: process 1 is the application (the live bytes of every device together, failed allocations,
// later NVTX ranges on their threads); each device is a process of its own ("device 0", "host memory")
// holding its timeline series, its pools and its growth findings.
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <string>

#include "analysis/format.h"
#include "analysis/model/stack_view.h"
#include "analysis/render/render_export.h"

namespace gmt::analysis {
namespace {

using Json = nlohmann::ordered_json;

constexpr int64_t kApplicationPid = 1;

int64_t device_pid(int64_t device) { return device >= 0 ? 10 + device : 2; }  // host memory: 2

double micros(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

class TraceEvents {
 public:
  void name_process(int64_t pid, const std::string& name, int64_t sort_index) {
    events_.push_back(
        Json{{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", name}}}});
    events_.push_back(Json{
        {"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", sort_index}}}});
  }
  void name_thread(int64_t pid, int64_t tid, const std::string& name) {
    events_.push_back(
        Json{{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
  }
  void counter(int64_t pid, const std::string& name, int64_t time_ns, uint64_t bytes) {
    events_.push_back(Json{
        {"ph", "C"}, {"name", name}, {"pid", pid}, {"tid", 0}, {"ts", micros(time_ns)}, {"args", {{"bytes", bytes}}}});
  }
  void instant(int64_t pid, const std::string& name, const std::string& category, int64_t time_ns, Json args) {
    events_.push_back(Json{{"ph", "i"},
                           {"name", name},
                           {"cat", category},
                           {"s", "p"},
                           {"pid", pid},
                           {"tid", 0},
                           {"ts", micros(time_ns)},
                           {"args", std::move(args)}});
  }
  void buckets(int64_t pid, const std::string& name, const std::vector<TimelineBucket>& buckets) {
    // Two tracks, so that a short spike shows as the most and a short dip as the least live bytes of its bucket.
    for (const TimelineBucket& bucket : buckets) counter(pid, name + " (max)", bucket.start_ns, bucket.max_bytes);
    for (const TimelineBucket& bucket : buckets) counter(pid, name + " (min)", bucket.start_ns, bucket.min_bytes);
  }
  // A push/pop range: a slice on its thread's track (they nest per thread, as slices must).
  void slice(int64_t pid, int64_t tid, const std::string& name, int64_t start_ns, int64_t end_ns, Json args) {
    events_.push_back(Json{{"ph", "X"},
                           {"name", name},
                           {"cat", "nvtx"},
                           {"pid", pid},
                           {"tid", tid},
                           {"ts", micros(start_ns)},
                           {"dur", micros(std::max<int64_t>(0, end_ns - start_ns))},
                           {"args", std::move(args)}});
  }
  // A start/end range: an async pair (b/e with an id), since such ranges may overlap without nesting.
  void async_span(int64_t pid, int64_t tid, uint64_t id, const std::string& name, int64_t start_ns, int64_t end_ns,
                  Json args) {
    events_.push_back(Json{{"ph", "b"},
                           {"name", name},
                           {"cat", "nvtx"},
                           {"id", id},
                           {"pid", pid},
                           {"tid", tid},
                           {"ts", micros(start_ns)},
                           {"args", std::move(args)}});
    events_.push_back(Json{{"ph", "e"},
                           {"name", name},
                           {"cat", "nvtx"},
                           {"id", id},
                           {"pid", pid},
                           {"tid", tid},
                           {"ts", micros(std::max(start_ns, end_ns))}});
  }
  // One allocation from its allocation to its free (or the end of the trace): an async pair, since allocations
  // overlap without nesting; Perfetto lays overlapping ones on tracks of their own under the device.
  void allocation(int64_t pid, uint64_t id, const std::string& category, const std::string& name, int64_t start_ns,
                  int64_t end_ns, Json args) {
    events_.push_back(Json{{"ph", "b"},
                           {"name", name},
                           {"cat", category},
                           {"id", id},
                           {"pid", pid},
                           {"tid", 0},
                           {"ts", micros(start_ns)},
                           {"args", std::move(args)}});
    events_.push_back(Json{{"ph", "e"},
                           {"name", name},
                           {"cat", category},
                           {"id", id},
                           {"pid", pid},
                           {"tid", 0},
                           {"ts", micros(std::max(start_ns, end_ns))}});
  }
  Json take() { return std::move(events_); }

 private:
  Json events_ = Json::array();
};

std::string innermost_function(const Stack& stack) {
  for (const Frame& frame : stack.frames) {
    if (frame.function) return *frame.function;
  }
  return stack.frames.empty() ? std::string() : format_pc(stack.frames.front().pc);
}

// Async ids of allocations start above those of NVTX start/end ranges (1 .. kMaxExportedRanges).
constexpr uint64_t kFirstAllocationId = 1'000'000;

// The allocation's args: what it is, and its stack with the user's own frame first (as the text report marks it).
Json allocation_args(const Lifetime& life, const AllocationSlices& slices, const RenderOptions& options) {
  Json args{{"size_bytes", life.size},
            {"memory_kind", std::string(schema::to_string(life.memory_kind))},
            {"level", life.level == LifeLevel::Block ? "block in a heap" : "CUDA allocation"},
            {"api", std::string(schema::to_string(life.api))},
            {"address", format_pc(life.address)},
            {"device", life.device},
            {"stream", format_pc(static_cast<uint64_t>(life.stream))},
            {"live_at_end", life.live()}};
  auto it = slices.stacks.find(life.stack_id);
  if (it == slices.stacks.end()) {
    args["user_frame"] = nullptr;
    args["stack"] = Json::array();
    return args;
  }
  const Frame* user = user_frame(it->second);
  args["user_frame"] = user ? Json(frame_label(*user, options.full_names)) : Json(nullptr);
  StackViewOptions view;
  view.max_lines = 12;
  view.full_stacks = options.full_stacks;
  view.full_names = options.full_names;
  args["stack"] = stack_view_lines(it->second, view);
  return args;
}

}  // namespace

std::string render_perfetto(const Report& report, const RenderOptions& options, const AllocationSlices* slices) {
  TraceEvents events;
  std::string application = report.trace.command_line ? *report.trace.command_line : report.trace.path;
  events.name_process(kApplicationPid, "gpumemtrace: " + application, 0);

  std::map<int64_t, bool> devices;  // every device that appears anywhere, named once
  for (const TimelineSeries& series : report.timeline.series) devices[series.device] = true;
  for (const DevicePeak& peak : report.peaks) devices[peak.device] = true;
  for (const GrowthFinding& finding : report.growth.findings) devices[finding.device] = true;
  if (report.pools) {
    for (const PoolUsage& pool : *report.pools) devices[pool.device] = true;
  }
  if (slices) {
    for (const Lifetime& life : slices->shown) devices[life.device] = true;
  }
  for (const auto& [device, unused] : devices) {
    events.name_process(device_pid(device), device_name(device), device_pid(device));
  }

  events.buckets(kApplicationPid, "live bytes, all devices", report.timeline.total);
  for (const TimelineSeries& series : report.timeline.series) {
    events.buckets(device_pid(series.device), fmt::format("{} live bytes", schema::to_string(series.memory_kind)),
                   series.buckets);
  }

  // A pool's last reserved sample and its used bytes at the end of the trace (exact when from events) are counters
  // at the end of the run, the moment of most unused memory an instant.
  if (report.pools) {
    for (const PoolUsage& pool : *report.pools) {
      const std::string name = "pool " + format_pc(static_cast<uint64_t>(pool.pool));
      const int64_t pid = device_pid(pool.device);
      events.counter(pid, name + " reserved bytes (last sample)", report.trace.duration_ns, pool.last_reserved_bytes);
      events.counter(pid, name + (pool.used_from_events ? " used bytes (at the end)" : " used bytes (last sample)"),
                     report.trace.duration_ns, pool.last_used_bytes);
      events.instant(pid, name + ": most reserved but unused", "pool", pool.max_unused_time_ns,
                     Json{{"unused_bytes", pool.max_unused_bytes},
                          {"peak_reserved_bytes", pool.peak_reserved_bytes},
                          {"peak_used_bytes", pool.peak_used_bytes}});
    }
  }

  for (const DevicePeak& peak : report.peaks) {
    events.instant(device_pid(peak.device), "peak " + format_bytes(peak.bytes), "peak", peak.time_ns,
                   Json{{"bytes", peak.bytes}, {"stack_groups", peak.stack_groups}});
  }

  const size_t failures = std::min(report.failures.size(), kMaxExportedFailures);
  for (size_t i = 0; i < failures; ++i) {
    const AllocFailure& failure = report.failures[i];
    Json args{{"requested_bytes", failure.requested_bytes},
              {"error", cuda_error_name(failure.error)},
              {"label", failure.label},
              {"device", failure.device},
              {"api", std::string(schema::to_string(failure.api))},
              {"innermost_function", innermost_function(failure.stack)}};
    if (failure.device_free) args["device_free"] = *failure.device_free;
    events.instant(kApplicationPid, fmt::format("failed allocation ({})", failure.label), "failure", failure.time_ns,
                   std::move(args));
  }

  for (const GrowthFinding& finding : report.growth.findings) {
    Json args{{"rate_bytes_per_s", finding.rate_bytes_per_s},
              {"start_time_ns", finding.start_time_ns},
              {"start_low_bytes", finding.start_low_bytes},
              {"end_low_bytes", finding.end_low_bytes}};
    if (finding.seconds_until_full) args["seconds_until_full"] = *finding.seconds_until_full;
    events.instant(
        device_pid(finding.device),
        fmt::format("steady growth {}/s", format_bytes(static_cast<uint64_t>(std::max(0.0, finding.rate_bytes_per_s)))),
        "growth", finding.end_time_ns, std::move(args));
  }

  // NVTX ranges (the Report's spans, outermost first, at most kMaxExportedRanges): slices on the application's
  // process, one track per thread. A range never closed runs to the end of the trace (args.closed = false).
  const size_t spans = std::min(report.range_spans.size(), kMaxExportedRanges);
  std::map<int64_t, bool> range_threads;
  for (size_t i = 0; i < spans; ++i) {
    const RangeSpan& span = report.range_spans[i];
    const int64_t end_ns = span.end_ns ? *span.end_ns : report.trace.duration_ns;
    Json args{{"domain", span.domain.empty() ? Json(nullptr) : Json(span.domain)},
              {"depth", span.depth},
              {"closed", span.end_ns.has_value()}};
    const std::string name = span.name.empty() ? "(unnamed range)" : span.name;
    if (!range_threads.count(span.thread_id)) {
      range_threads[span.thread_id] = true;
      events.name_thread(kApplicationPid, span.thread_id, fmt::format("thread {} (NVTX ranges)", span.thread_id));
    }
    if (span.depth >= 0) {
      events.slice(kApplicationPid, span.thread_id, name, span.start_ns, end_ns, std::move(args));
    } else {
      events.async_span(kApplicationPid, span.thread_id, i + 1, name, span.start_ns, end_ns, std::move(args));
    }
  }

  // Single allocations (analysis/model/allocation_slices.h): the largest of each window of the run; the rest summed.
  Json allocations = nullptr;
  if (slices) {
    uint64_t id = kFirstAllocationId;
    for (const Lifetime& life : slices->shown) {
      const bool block = life.level == LifeLevel::Block;
      const std::string name = fmt::format("{} {}", schema::to_string(life.api), format_bytes(life.size));
      events.allocation(device_pid(life.device), id++, block ? "block" : "allocation", name, life.alloc_ns,
                        life.live() ? slices->duration_ns : life.free_ns, allocation_args(life, *slices, options));
    }
    Json not_shown = Json::object();
    uint64_t lives_not_shown = 0;
    uint64_t bytes_not_shown = 0;
    for (const auto& [device, summed] : slices->not_shown) {
      not_shown[device_name(device)] = {{"allocations", summed.lives}, {"bytes", summed.bytes}};
      lives_not_shown += summed.lives;
      bytes_not_shown += summed.bytes;
    }
    allocations = Json{{"shown", slices->shown.size()},
                       {"allocations", slices->lives},
                       {"not_shown", lives_not_shown},
                       {"not_shown_bytes", bytes_not_shown},
                       {"not_shown_by_device", std::move(not_shown)},
                       {"rule", fmt::format("the {} largest allocations of each {} ms window of the run, by allocation "
                                            "time; the rest counted and summed here",
                                            slices->per_window, static_cast<double>(slices->window_ns) / 1e6)}};
  }

  Json document{{"traceEvents", events.take()},
                {"displayTimeUnit", "ms"},
                {"otherData",
                 {{"producer", "gpumemtrace"},
                  {"trace", report.trace.path},
                  {"bucket_ns", report.timeline.bucket_ns},
                  {"failures_not_shown", report.failures.size() - failures},
                  {"range_spans_not_shown", report.range_spans.size() - spans + report.range_spans_left_out},
                  {"allocation_slices", std::move(allocations)}}}};
  return document.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace gmt::analysis
