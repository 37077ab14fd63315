#include "analysis/read/aggregate.h"

#include "analysis/read/trace_info.h"
#include "schema/aggregate_schema.h"

namespace gmt::analysis {

namespace agg = schema::aggregate;

bool is_aggregate_trace(const TraceFile& trace) {
  return trace.meta(agg::kTraceModeKey).value_or("") == agg::kTraceModeAggregate;
}

std::optional<AggregateTables> read_aggregate_tables(const TraceFile& trace) {
  if (!is_aggregate_trace(trace)) return std::nullopt;
  AggregateTables t;
  auto count = [&](const char* key) { return static_cast<uint64_t>(lenient_meta_int(trace, key).value_or(0)); };
  t.t0_ns = lenient_meta_int(trace, agg::kT0NsKey).value_or(0);
  t.window_ns = lenient_meta_int(trace, agg::kWindowNsKey).value_or(agg::kFirstWindowNs);
  if (t.window_ns <= 0) t.window_ns = agg::kFirstWindowNs;
  t.events_seen = count(agg::kEventsSeenKey);
  t.events_kept = count(agg::kEventsKeptKey);
  t.synchronize_events = count(agg::kSynchronizeEventsKey);
  t.failures_with_context = count(agg::kFailuresWithContextKey);
  t.failures_without_context = count(agg::kFailuresWithoutContextKey);
  // A trace killed before its first checkpoint has the meta but not yet the tables.
  if (trace.has_table("aggregate_windows")) {
    Statement rows(trace, "SELECT window, stack_id, level, memory_kind, device, allocs, alloc_bytes, frees, free_bytes "
                          "FROM aggregate_windows ORDER BY window, stack_id, level, memory_kind, device");
    while (rows.step()) {
      AggregateWindowRow r;
      r.window = rows.column_int(0);
      r.stack_id = rows.column_int(1);
      r.level = static_cast<int>(rows.column_int(2));
      r.memory_kind = static_cast<int>(rows.column_int(3));
      r.device = rows.column_int(4);
      r.allocs = static_cast<uint64_t>(rows.column_int(5));
      r.alloc_bytes = static_cast<uint64_t>(rows.column_int(6));
      r.frees = static_cast<uint64_t>(rows.column_int(7));
      r.free_bytes = static_cast<uint64_t>(rows.column_int(8));
      t.windows.push_back(r);
    }
  }
  if (trace.has_table("aggregate_levels")) {
    Statement rows(trace, "SELECT window, level, device, low_bytes, high_bytes, end_bytes FROM aggregate_levels "
                          "ORDER BY window, level, device");
    while (rows.step()) {
      AggregateLevelRow r;
      r.window = rows.column_int(0);
      r.level = static_cast<int>(rows.column_int(1));
      r.device = rows.column_int(2);
      r.low_bytes = rows.column_int(3);
      r.high_bytes = rows.column_int(4);
      r.end_bytes = rows.column_int(5);
      t.levels.push_back(r);
    }
  }
  if (trace.has_table("aggregate_ranges") && trace.has_table("strings")) {
    Statement rows(trace, "SELECT a.domain_id, a.name_id, d.text, n.text, sum(a.repetitions), sum(a.total_ns), "
                          "max(a.max_ns) FROM aggregate_ranges a LEFT JOIN strings d ON d.id = a.domain_id "
                          "LEFT JOIN strings n ON n.id = a.name_id GROUP BY a.domain_id, a.name_id "
                          "ORDER BY a.domain_id, a.name_id");
    Statement ends(trace, "SELECT repetition, live_bytes FROM aggregate_range_ends WHERE domain_id = ?1 AND "
                          "name_id = ?2 ORDER BY repetition");
    while (rows.step()) {
      AggregateRangeRow r;
      r.domain = rows.column_text(2).value_or("");
      r.name = rows.column_text(3).value_or("");
      r.repetitions = static_cast<uint64_t>(rows.column_int(4));
      r.total_ns = static_cast<uint64_t>(rows.column_int(5));
      r.max_ns = static_cast<uint64_t>(rows.column_int(6));
      ends.reset();
      ends.bind(1, rows.column_int(0));
      ends.bind(2, rows.column_int(1));
      while (ends.step()) {
        r.repetition.push_back(ends.column_int(0));
        r.live_at_end.push_back(ends.column_int(1));
      }
      t.ranges.push_back(std::move(r));
    }
  }
  return t;
}

}  // namespace gmt::analysis
