#include "analysis/read/allocator_stats.h"

#include <algorithm>

namespace gmt::analysis {
namespace {

std::optional<uint64_t> optional_bytes(const Statement& s, int column) {
  if (s.column_is_null(column)) return std::nullopt;
  return static_cast<uint64_t>(std::max<int64_t>(0, s.column_int(column)));
}

}  // namespace

bool for_each_allocator_sample(const TraceFile& trace, const std::function<void(const AllocatorStatsRow&)>& each) {
  // The table's existence decides, not the schema version (as for pool_usage).
  if (!trace.has_table("allocator_stats")) return false;
  Statement rows(trace,
                 "SELECT time_ns, device, allocator, trigger, in_use_bytes, reserved_bytes, inactive_split_bytes, "
                 "alloc_retries, ooms, request_bytes FROM allocator_stats ORDER BY time_ns, rowid");
  while (rows.step()) {
    const int64_t allocator = rows.column_int(2);
    const int64_t trigger = rows.column_int(3);
    if (allocator < 1 || allocator > schema::kMaxFrameworkAllocator || trigger < 1 ||
        trigger > schema::kMaxSampleTrigger) {
      continue;
    }
    AllocatorStatsRow row;
    row.time_ns = rows.column_int(0);
    row.device = rows.column_int(1);
    row.allocator = static_cast<schema::FrameworkAllocator>(allocator);
    row.trigger = static_cast<schema::SampleTrigger>(trigger);
    row.in_use_bytes = optional_bytes(rows, 4);
    row.reserved_bytes = optional_bytes(rows, 5);
    row.inactive_split_bytes = optional_bytes(rows, 6);
    row.alloc_retries = optional_bytes(rows, 7);
    row.ooms = optional_bytes(rows, 8);
    row.request_bytes = optional_bytes(rows, 9);
    each(row);
  }
  return true;
}

}  // namespace gmt::analysis
