// The pool_usage table: samples of stream-ordered pools' reserved and used bytes (pools.h matches them to pools).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "analysis/read/trace_file.h"

namespace gmt::analysis {

struct PoolUsageSample {
  int64_t time_ns = 0;  // absolute
  uint64_t pool = 0;
  int64_t device = -1;
  uint64_t reserved = 0;  // negative stored bytes (a damaged trace) read as 0
  uint64_t used = 0;
};

// Every sample by time; nullopt for a trace without the table.
std::optional<std::vector<PoolUsageSample>> read_pool_usage(const TraceFile& trace);

}  // namespace gmt::analysis
