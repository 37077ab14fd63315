// The aggregate trace's own tables (schema/aggregate_schema.h, `run --aggregate`), read into typed rows. The
// `events` table of such a trace is read like any other (it is a subsequence of the full trace's events).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/read/trace_file.h"

namespace gmt::analysis {

struct AggregateWindowRow {
  int64_t window = 0;
  int64_t stack_id = 0;
  int level = 0;  // schema::aggregate::kLevel*
  int memory_kind = 0;
  int64_t device = -1;
  uint64_t allocs = 0, alloc_bytes = 0, frees = 0, free_bytes = 0;
};
struct AggregateLevelRow {
  int64_t window = 0;
  int level = 0;
  int64_t device = -1;
  int64_t low_bytes = 0, high_bytes = 0, end_bytes = 0;
};
struct AggregateRangeRow {
  std::string domain, name;
  uint64_t repetitions = 0, total_ns = 0, max_ns = 0;  // every window together
  std::vector<int64_t> repetition;                     // the kept ends (aggregate_range_ends), in order
  std::vector<int64_t> live_at_end;
};

struct AggregateTables {
  int64_t t0_ns = 0;
  int64_t window_ns = 0;
  uint64_t events_seen = 0;
  uint64_t events_kept = 0;
  uint64_t synchronize_events = 0;
  uint64_t failures_with_context = 0;
  uint64_t failures_without_context = 0;
  std::vector<AggregateWindowRow> windows;  // by window
  std::vector<AggregateLevelRow> levels;    // by window
  std::vector<AggregateRangeRow> ranges;    // by domain, name
};

// Whether `trace` is an aggregate trace (meta trace_mode = "aggregate"; schema 10 and later).
bool is_aggregate_trace(const TraceFile& trace);

// The tables of an aggregate trace; nullopt for a full trace.
std::optional<AggregateTables> read_aggregate_tables(const TraceFile& trace);

}  // namespace gmt::analysis
