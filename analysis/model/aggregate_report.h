// An aggregate trace (`run --aggregate`, schema/aggregate_schema.h) in the report. The event pass reads its `events`
// table unchanged: it holds every allocation live at the end, at each tracked peak and at the kept failures, under
// the ids of the full trace, so leaks, peaks with their stacks, fragmentation at the peak and at the end, and
// failures with their context come out exactly as from the full trace. What needs every event is taken from the
// per-window tables instead (apply_aggregate): the totals (exact), growth over time and the timeline (per window),
// growth per range repetition (per kept end). docs/trace-format.md "Aggregate traces" and docs/analysis.md say which
// figure is which.
#pragma once

#include <cstdint>
#include <string>

#include "analysis/model/options.h"
#include "analysis/model/report.h"
#include "analysis/read/aggregate.h"
#include "analysis/read/trace_file.h"

namespace gmt::analysis {

struct AggregateSummary {
  int64_t window_ns = 0;  // the windows' length at the end of the run
  uint64_t windows = 0;   // windows spanned by the run
  uint64_t events_seen = 0;
  uint64_t events_kept = 0;  // rows of `events`
  uint64_t synchronize_events = 0;
  uint64_t failures_with_context = 0;
  uint64_t failures_without_context = 0;  // past the first 64: their own row only, no live set
  // The one line every renderer says about it.
  std::string note() const;
};

// The report options an aggregate trace cannot honour (they need every event), as one line naming the first one
// given; empty when none is.
std::string aggregate_refuses(const EventFilters& filters);

// Fills the report's totals, growth, timeline and range growth from the windows (see above).
void apply_aggregate(Report& report, const AggregateTables& tables, const TraceFile& trace,
                     const AnalyzeOptions& options);

}  // namespace gmt::analysis
