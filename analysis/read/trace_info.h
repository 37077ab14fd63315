// The trace's meta table as the report's header reads it (TraceInfo), and lenient lookups for the other passes.
#pragma once

#include <cstdint>
#include <optional>

#include "analysis/model.h"
#include "analysis/read/trace_file.h"

namespace gmt::analysis {

// meta values are text written by the recorder; a malformed number is reported as absent rather than
// failing the whole report (TraceFile::meta_int would throw).
std::optional<int64_t> lenient_meta_int(const TraceFile& trace, const char* key);

// Whether meta `key` is "1".
bool meta_flag(const TraceFile& trace, const char* key);

// Every field of `info` the trace itself says (path, schema, meta, missing tables); the passes fill in the rest.
void read_trace_info(const TraceFile& trace, TraceInfo& info);

}  // namespace gmt::analysis
