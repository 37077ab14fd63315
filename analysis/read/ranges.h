// The ranges table (NVTX push/pop and start/end ranges) with their domain and name texts.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "analysis/read/trace_file.h"

namespace gmt::analysis {

struct RangeRow {
  int64_t id = 0;
  int64_t thread_id = 0;
  int64_t start_ns = 0;
  std::optional<int64_t> end_ns;  // nullopt: still open when the trace ended
  int64_t depth = 0;
  // "" when unknown: a NULL text, or a trace without the strings table (trace_tables.h), whose ranges are then
  // all nameless.
  std::string domain;
  std::string name;
};

// Calls `each` for every range, by start time, then id. The caller checks that the trace has the table.
void read_ranges(const TraceFile& trace, const std::function<void(const RangeRow&)>& each);

}  // namespace gmt::analysis
