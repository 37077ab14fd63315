// The model's entry points: a trace in, a Report (report.h) out. analyze.cpp runs the passes over the trace's
// events (event_pass.h) and hands the Report to the passes that read it whole (heaps, tensor blocks, cross-check).
#pragma once

#include <string>

#include "analysis/model/options.h"
#include "analysis/model/report.h"
#include "analysis/read/trace_file.h"

namespace gmt::analysis {

// Reads the whole trace. Throws TraceError when SQLite cannot read it (a damaged file); odd values in a
// readable trace never throw: they are counted in Totals::inconsistencies instead.
Report analyze_trace(const TraceFile& trace, const AnalyzeOptions& options = {});

// Opens and analyzes the trace at `path`; when it is damaged (read/salvage.h's truncation() says so, or SQLite finds
// it malformed), salvages it and analyzes what was salvaged: report.trace.salvaged then says what was lost, and the
// trace is incomplete. Throws TraceError for a trace that cannot be read at all (not a trace, a newer schema, nothing
// salvageable).
Report analyze_trace_file(const std::string& path, const AnalyzeOptions& options = {});

}  // namespace gmt::analysis
