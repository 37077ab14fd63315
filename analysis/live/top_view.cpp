// See top_view.h.
#include "analysis/live/top_view.h"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>

#include "analysis/model/aggregate_report.h"
#include "analysis/model/analyze.h"
#include "analysis/model/stack_view.h"
#include "analysis/read/aggregate.h"
#include "analysis/read/control_marks.h"
#include "analysis/read/stacks.h"
#include "schema/aggregate_schema.h"

namespace gmt::analysis {
namespace {

namespace agg = schema::aggregate;

constexpr size_t kStackLines = 4;  // lines of each site's stack: the list is a glance, `report` has the rest

// What makes two groups one call site across two analyses (or a raw stack of the aggregate's windows and a leak
// group): every frame's function, file and line, as the leaks group them (unsymbolized frames by pc).
std::string site_key(const Stack& stack) {
  std::string key;
  for (const Frame& frame : stack.frames) key += frame_label(frame, /*full_names=*/true) + '\x1f';
  return key;
}

TopSite site_of(const Stack& stack, uint64_t bytes, uint64_t count) {
  TopSite site;
  site.bytes = bytes;
  site.count = count;
  if (const Frame* user = user_frame(stack)) {
    site.where = frame_label(*user);
  } else if (const std::vector<const Frame*> frames = frames_without_start(stack); !frames.empty()) {
    site.where = frame_label(*frames.front());
  } else {
    site.where = stack.id == 0 ? "(no call stack recorded)" : "(empty call stack)";
  }
  StackViewOptions view;
  view.max_lines = kStackLines;
  site.stack = stack_view_lines(stack, view);
  return site;
}

// What one call site holds: the leak groups of a report (what is live at its end) whose stacks are the same once
// symbolized. The report grouped the running process's unsymbolized stacks by pc, so one line may be several groups.
struct SiteBytes {
  const Stack* stack = nullptr;  // the first group's
  uint64_t bytes = 0;
  uint64_t count = 0;
};

// The sites of `leaks`, their stacks symbolized in place.
std::unordered_map<std::string, SiteBytes> live_by_key(std::vector<LeakGroup>& leaks, PcSymbolizer& symbols) {
  std::unordered_map<std::string, SiteBytes> by_key;
  for (LeakGroup& group : leaks) {
    symbols.fill(group.stack);
    SiteBytes& site = by_key[site_key(group.stack)];
    if (site.stack == nullptr) site.stack = &group.stack;
    site.bytes += group.bytes;
    site.count += group.count;
  }
  return by_key;
}

// Whether the last control mark is a pause not yet resumed.
bool paused_now(const TraceFile& trace) {
  const ControlMarks marks = read_control_marks(trace);
  if (marks.pause_starts_ns.empty()) return false;
  return marks.resumes_ns.empty() || marks.resumes_ns.back() < marks.pause_starts_ns.back();
}

// Each device's live bytes now, its peak, its tensors, and the recent past: the last `recent_ns` of the timeline (the
// whole run when shorter) in `sparkline_points` points, each the highest level of the buckets it covers.
void fill_devices(TopView& view, const Report& report, const TopOptions& options) {
  std::map<int64_t, TopDevice> devices;
  const Timeline& timeline = report.timeline;
  const size_t buckets = timeline.total.size();
  size_t per_point = 1;
  if (timeline.bucket_ns > 0) {
    const int64_t recent = std::min<int64_t>(options.recent_ns, timeline.bucket_ns * static_cast<int64_t>(buckets));
    const size_t recent_buckets = static_cast<size_t>((recent + timeline.bucket_ns - 1) / timeline.bucket_ns);
    per_point = std::max<size_t>(1, (recent_buckets + options.sparkline_points - 1) / options.sparkline_points);
  }
  const size_t points = std::min(options.sparkline_points, (buckets + per_point - 1) / per_point);
  const size_t first_bucket = buckets - std::min(buckets, points * per_point);
  view.recent_span_ns = timeline.bucket_ns * static_cast<int64_t>(buckets - first_bucket);
  for (const TimelineSeries& series : timeline.series) {
    TopDevice& device = devices[series.device];
    device.device = series.device;
    device.cuda_bytes += series.end_bytes;
    // A point: the highest level of each memory kind of the device over its buckets, summed over the kinds.
    if (device.recent.empty()) device.recent.assign(points, 0);
    std::vector<uint64_t> point_max(points, 0);
    for (size_t b = first_bucket; b < series.buckets.size() && b < buckets; ++b) {
      const size_t point = (b - first_bucket) / per_point;
      if (point < points) point_max[point] = std::max(point_max[point], series.buckets[b].max_bytes);
    }
    for (size_t p = 0; p < points; ++p) device.recent[p] += point_max[p];
  }
  for (const DevicePeak& peak : report.peaks) {
    if (auto it = devices.find(peak.device); it != devices.end()) it->second.cuda_peak_bytes = peak.bytes;
  }
  if (report.tensor_blocks) {
    for (const LeakGroup& group : report.tensor_blocks->alive_at_exit) {
      // A Python line's tensors sit on one device in practice; a group over several counts on its first.
      const int64_t device = group.devices.empty() ? -1 : group.devices.front();
      TopDevice& d = devices[device];
      d.device = device;
      d.tensor_bytes = d.tensor_bytes.value_or(0) + group.bytes;
    }
    for (auto& [ordinal, device] : devices) {
      if (ordinal >= 0 && !device.tensor_bytes) device.tensor_bytes = 0;
    }
  }
  for (auto& [ordinal, device] : devices) view.devices.push_back(std::move(device));
}

// Growth of a full trace: what each site holds now less what it held `window` ago (the report's --at, from the
// same events).
std::unordered_map<std::string, int64_t> held_before(const TraceFile& trace, const TopOptions& options, TopView& view,
                                                     PcSymbolizer& symbols) {
  std::unordered_map<std::string, int64_t> before;
  if (view.duration_ns <= options.growth_window_ns) {
    view.growth_window_ns = view.duration_ns;  // since the start: nothing was held before it
    return before;
  }
  view.growth_window_ns = options.growth_window_ns;
  AnalyzeOptions then;
  then.top_stacks = options.sites;
  then.filters.until_ns = view.duration_ns - options.growth_window_ns;
  Report earlier = analyze_trace(trace, then);
  for (const auto& [key, site] : live_by_key(earlier.leaks, symbols)) before[key] = static_cast<int64_t>(site.bytes);
  return before;
}

// Growth of an aggregate trace, from its per-window sums (the report's own rule, aggregate_report.cpp): net bytes per
// allocating stack over the windows that start inside the last `window`, at the level its growth is judged.
std::unordered_map<std::string, int64_t> grown_in_windows(const TraceFile& trace, const Report& report,
                                                          const TopOptions& options, TopView& view,
                                                          PcSymbolizer& symbols, std::map<std::string, Stack>& stacks) {
  std::unordered_map<std::string, int64_t> grown;
  const std::optional<AggregateTables> tables = read_aggregate_tables(trace);
  if (!tables || tables->window_ns <= 0) return grown;
  const int64_t origin = report.trace.start_monotonic_ns.value_or(tables->t0_ns);
  const int64_t from = view.duration_ns - options.growth_window_ns;
  bool blocks = false;
  for (const AggregateWindowRow& row : tables->windows) blocks = blocks || row.level == agg::kLevelBlock;
  std::unordered_map<int64_t, int64_t> by_stack;
  int64_t first_start = view.duration_ns;
  for (const AggregateWindowRow& row : tables->windows) {
    if (row.level == agg::kLevelSegment || (!blocks && row.level != agg::kLevelCuda)) continue;
    const int64_t start = tables->t0_ns + row.window * tables->window_ns - origin;
    if (start < from) continue;
    first_start = std::min(first_start, start);
    by_stack[row.stack_id] += static_cast<int64_t>(row.alloc_bytes) - static_cast<int64_t>(row.free_bytes);
  }
  view.growth_window_ns = view.duration_ns - std::max<int64_t>(first_start, 0);
  StackLoader loader(trace);
  for (const auto& [stack_id, bytes] : by_stack) {
    Stack stack = loader.load(stack_id);
    symbols.fill(stack);
    const std::string key = site_key(stack);
    grown[key] += bytes;
    stacks.emplace(key, std::move(stack));
  }
  return grown;
}

void fill_growth(TopView& view, const TraceFile& trace, Report& report, const TopOptions& options,
                 const std::unordered_map<std::string, SiteBytes>& now, PcSymbolizer& symbols) {
  std::vector<TopSite> grown;
  if (report.aggregate) {
    std::map<std::string, Stack> stacks;
    for (const auto& [key, bytes] : grown_in_windows(trace, report, options, view, symbols, stacks)) {
      if (bytes <= 0) continue;
      auto live = now.find(key);
      TopSite site = live != now.end() ? site_of(*live->second.stack, live->second.bytes, live->second.count)
                                       : site_of(stacks.at(key), 0, 0);
      site.growth_bytes = bytes;
      grown.push_back(std::move(site));
    }
  } else {
    const std::unordered_map<std::string, int64_t> before = held_before(trace, options, view, symbols);
    for (const auto& [key, live] : now) {
      auto then = before.find(key);
      const int64_t growth = static_cast<int64_t>(live.bytes) - (then == before.end() ? 0 : then->second);
      if (growth <= 0) continue;
      TopSite site = site_of(*live.stack, live.bytes, live.count);
      site.growth_bytes = growth;
      grown.push_back(std::move(site));
    }
  }
  std::sort(grown.begin(), grown.end(), [](const TopSite& a, const TopSite& b) {
    return a.growth_bytes != b.growth_bytes ? a.growth_bytes > b.growth_bytes : a.where < b.where;
  });
  if (grown.size() > options.sites) grown.resize(options.sites);
  view.by_growth = std::move(grown);
}

}  // namespace

TopView build_top_view(const TraceFile& trace, const TopOptions& options, PcSymbolizer& symbols) {
  symbols.update_modules(trace);
  AnalyzeOptions analyze_options;
  analyze_options.top_stacks = options.sites;
  Report report = analyze_trace(trace, analyze_options);

  TopView view;
  view.trace_path = trace.path();
  view.pid = report.trace.pid;
  view.command_line = report.trace.command_line.value_or("");
  view.aggregate = report.aggregate != nullptr;
  view.complete = report.trace.complete;
  view.paused = paused_now(trace);
  view.duration_ns = report.trace.duration_ns;
  view.events = report.trace.event_count;
  const bool blocks = std::any_of(report.heaps.begin(), report.heaps.end(),
                                  [](const HeapAtExit& heap) { return heap.blocks_recorded && !heap.opaque; });
  view.level = blocks ? "tensors and other CUDA memory" : "CUDA allocations";
  fill_devices(view, report, options);

  const std::unordered_map<std::string, SiteBytes> now = live_by_key(report.leaks, symbols);
  std::vector<const SiteBytes*> live;
  for (const auto& [key, site] : now) live.push_back(&site);
  std::sort(live.begin(), live.end(), [](const SiteBytes* a, const SiteBytes* b) {
    return a->bytes != b->bytes ? a->bytes > b->bytes : a->stack->id < b->stack->id;
  });
  if (live.size() > options.sites) live.resize(options.sites);
  for (const SiteBytes* site : live) view.by_live.push_back(site_of(*site->stack, site->bytes, site->count));
  fill_growth(view, trace, report, options, now, symbols);

  view.failures_total = report.failures.size();
  const size_t first = report.failures.size() > options.failures ? report.failures.size() - options.failures : 0;
  for (size_t i = first; i < report.failures.size(); ++i) {
    AllocFailure& failure = report.failures[i];
    symbols.fill(failure.stack);
    view.failures.push_back(TopFailure{failure.time_ns, failure.requested_bytes, failure.device, failure.label,
                                       site_of(failure.stack, 0, 0).where});
  }

  if (report.trace.unjudged_after_pause_allocations > 0) view.notes.push_back(unjudged_after_pause_text(report.trace));
  if (report.aggregate) view.notes.push_back(report.aggregate->note());
  if (report.trace.dropped_events > 0) {
    view.notes.push_back(std::to_string(report.trace.dropped_events) + " events were lost while recording");
  }
  return view;
}

}  // namespace gmt::analysis
