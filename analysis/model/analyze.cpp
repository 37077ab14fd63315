#include "analysis/model/analyze.h"

#include "analysis/model/aggregate_report.h"
#include "analysis/read/aggregate.h"

#include <memory>
#include <string>

#include "analysis/model/event_pass.h"
#include "analysis/model/heaps.h"
#include "analysis/model/tensor_blocks.h"
#include "analysis/model/verify.h"
#include "analysis/read/events.h"
#include "analysis/read/salvage.h"
#include "analysis/read/stacks.h"
#include "analysis/read/trace_info.h"

namespace gmt::analysis {

// One pass over one set of events, tried in time order from the recording's order with growing windows, then sorted by
// SQLite. `heaps`: filled by the CudaLevel pass, read by the AppLevel pass; nullptr for TensorBlocks.
static Report analyze_event_set(const TraceFile& trace, const AnalyzeOptions& options, EventSet set, HeapPass* heaps) {
  // Each attempt starts from what the CudaLevel pass handed over (nothing, for that pass itself).
  auto attempt = [&](EventOrder order, size_t window) {
    if (heaps && set == EventSet::CudaLevel) *heaps = HeapPass{};
    if (heaps) heaps->layout = HeapLayout{};
    return run_event_pass(trace, options, order, window, set, heaps);
  };
  // A trace that says its times follow recording order needs no window; a small one still guards it.
  bool time_ordered = lenient_meta_int(trace, schema::meta::kEventsTimeOrdered).value_or(0) == 1;
  if (time_ordered) {
    try {
      return attempt(EventOrder::RecordingWindow, kSmallEventWindow);
    } catch (const EventsOutOfOrder&) {
    }
  }
  for (size_t window : kEventWindows) {
    try {
      return attempt(EventOrder::RecordingWindow, window);
    } catch (const EventsOutOfOrder&) {
      // Rare: in a trace without events_time_ordered, a thread stalled between its clock read and the
      // recorder's lock for longer than the window, or a trace written in another order. Start over with a larger
      // window, then with SQLite's sort.
    }
  }
  return attempt(EventOrder::SortedBySqlite, 1);
}

Report analyze_trace(const TraceFile& trace, const AnalyzeOptions& options) {
  const std::optional<AggregateTables> aggregate = read_aggregate_tables(trace);
  if (aggregate) {
    if (std::string refused = aggregate_refuses(options.filters); !refused.empty()) throw TraceError(refused);
  }
  HeapPass heaps;
  Report report = analyze_event_set(trace, options, EventSet::CudaLevel, &heaps);
  AnalyzeOptions quiet_options = options;
  quiet_options.progress = nullptr;  // one progress indicator per report: the CUDA-level pass's
  if (heaps.backing.any_segment()) {
    // A heap's segments were recorded: what the app held is its blocks, not the CUDA memory behind them.
    apply_app_level(report, analyze_event_set(trace, quiet_options, EventSet::AppLevel, &heaps), heaps);
  }
  add_unrecorded_heaps(report, trace);
  if (meta_flag(trace, schema::meta::kTensorBlocks)) {
    report.tensor_blocks =
        tensor_block_report(analyze_event_set(trace, quiet_options, EventSet::TensorBlocks, nullptr), trace);
  }
  if (has_cross_check(trace)) {
    StackLoader stacks(trace);
    report.cross_check = std::make_shared<const CrossCheck>(
        cross_check_trace(trace, [&stacks](int64_t id) -> const Stack& { return stacks.load(id); }));
  }
  if (aggregate) apply_aggregate(report, *aggregate, trace, options);
  return report;
}

Report analyze_trace_file(const std::string& path, const AnalyzeOptions& options) {
  if (!truncation(path)) {
    try {
      const TraceFile trace = TraceFile::open(path);
      return analyze_trace(trace, options);
    } catch (const TraceDamaged&) {
      // SQLite found the file malformed, at opening or halfway through: salvage what it still holds.
    }
  }
  const SalvagedTrace salvaged = salvage_trace(path);
  const TraceFile trace = TraceFile::open(salvaged.path());
  Report report = analyze_trace(trace, options);
  report.trace.path = path;
  report.trace.complete = false;
  report.trace.salvaged = salvaged.info().summary();
  return report;
}

}  // namespace gmt::analysis
