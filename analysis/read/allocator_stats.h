// The allocator_stats table (schema v6): framework allocators' own statistics, one row per sample.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "analysis/read/trace_file.h"
#include "schema/trace_schema.h"

namespace gmt::analysis {

struct AllocatorStatsRow {
  int64_t time_ns = 0;  // absolute
  int64_t device = 0;
  schema::FrameworkAllocator allocator = schema::FrameworkAllocator::TorchCaching;
  schema::SampleTrigger trigger = schema::SampleTrigger::Cadence;
  // nullopt for NULL; a negative stored value (a damaged trace) reads as 0.
  std::optional<uint64_t> in_use_bytes;
  std::optional<uint64_t> reserved_bytes;
  std::optional<uint64_t> inactive_split_bytes;
  std::optional<uint64_t> alloc_retries;
  std::optional<uint64_t> ooms;
  std::optional<uint64_t> request_bytes;
};

// Calls `each` for every row, by time then rowid, except rows whose allocator or trigger code this build does not
// know (a newer writer, a damaged trace): those are skipped rather than misread. False when the trace has no such
// table (traces before v6).
bool for_each_allocator_sample(const TraceFile& trace, const std::function<void(const AllocatorStatsRow&)>& each);

}  // namespace gmt::analysis
