// What a report is asked for: the options every pass reads (analyze.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "analysis/model/filters.h"

namespace gmt::analysis {

struct SuppressionSet;  // suppressions.h

struct AnalyzeOptions {
  // Leak groups whose total bytes are below this are left out of Report::leaks (and counted in
  // Report::leak_groups_below_min_bytes). Totals always cover every leak.
  std::optional<uint64_t> min_bytes;
  // Call stacks kept for each moment of the analysis over time (live at a peak, growing, holding memory at a
  // failed allocation), largest first.
  size_t top_stacks = 10;
  // Called every 65536 events read, with the events read so far and an estimate of all of
  // them (the highest event id): for a progress indicator. Empty: not called.
  std::function<void(uint64_t events_read, uint64_t events_estimated)> progress;
  // Which events are analyzed (filters.h); the default analyzes every event.
  EventFilters filters;
  // Known leaks to leave out of the leaks and the leak totals (suppressions.h); nullptr: none. Not owned.
  const SuppressionSet* suppressions = nullptr;
};

}  // namespace gmt::analysis
