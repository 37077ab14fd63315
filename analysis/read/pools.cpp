#include "analysis/read/pools.h"

#include <algorithm>

namespace gmt::analysis {

std::optional<std::vector<PoolUsageSample>> read_pool_usage(const TraceFile& trace) {
  // The table's existence decides, not the schema version: a trace may be upgraded or hand-made.
  if (!trace.has_table("pool_usage")) return std::nullopt;
  Statement rows(trace, "SELECT time_ns, pool, device, reserved_bytes, used_bytes FROM pool_usage ORDER BY time_ns");
  auto bytes = [](int64_t value) { return static_cast<uint64_t>(std::max<int64_t>(0, value)); };
  std::vector<PoolUsageSample> samples;
  while (rows.step()) {
    samples.push_back(PoolUsageSample{rows.column_int(0), static_cast<uint64_t>(rows.column_int(1)), rows.column_int(2),
                                      bytes(rows.column_int(3)), bytes(rows.column_int(4))});
  }
  return samples;
}

}  // namespace gmt::analysis
