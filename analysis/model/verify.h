// The cross-check of `run --verify` (docs/analysis.md, "Cross-check"): both driver-level backends recorded every
// event, each under its own source; the counting one (meta backend) makes every figure of the report, the other
// (meta verify_backend) is only matched against it here. The two records of one call are consecutive among the
// calling thread's records, in a known order: CUPTI's callback runs inside the driver wrapper's real call, so
// CUPTI records first what is recorded at a call's exit (allocations, creations, maps) and second what is recorded
// at its entry (frees, releases, unmaps, destroys). Each second record pairs with the first record right before
// it when both have the same kind, memory kind, address, size and handle; what stays unpaired is a disagreement:
// an allocation, free or VMM/pool call one backend saw and the other did not, attributed to that very call.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "analysis/model/report.h"
#include "analysis/read/cross_check.h"

namespace gmt::analysis {

struct MatchResult {
  uint64_t matched = 0;                 // pairs
  uint64_t named_differently = 0;       // pairs whose api differs (a static cudart that only CUPTI can name)
  uint64_t on_other_device = 0;         // pairs whose device differs
  std::vector<CheckedEvent> unmatched;  // in recording order
};

// The matching alone, over both backends' events in recording order (events.id). Names, devices, stacks and
// times may differ within a pair; they are counted, never used to pair. The thread is part of the order: records
// pair only within one thread's sequence.
MatchResult match_events(const std::vector<CheckedEvent>& events);

// Unmatched events grouped as a reader tells them apart: which backend saw them, the event kind, the call, the
// memory kind and the call stack.
struct Disagreement {
  bool seen_by_counting = false;  // true: only the counting backend saw these; false: only the cross-check
  schema::EventKind kind = schema::EventKind::Alloc;
  schema::Api api = schema::Api::Unknown;
  schema::MemoryKind memory_kind = schema::MemoryKind::None;
  uint64_t count = 0;
  uint64_t bytes = 0;              // their sizes summed (0 for frees)
  int64_t first_time_ns = 0;       // relative to the process start
  std::vector<int64_t> event_ids;  // the first kMaxEventIdsPerGroup, ascending
  Stack stack;
};
inline constexpr size_t kMaxEventIdsPerGroup = 5;

struct CrossCheck {
  std::string counting_backend;            // meta backend
  std::string checking_backend;            // meta verify_backend; "" when the cross-check did not run
  std::optional<std::string> unavailable;  // meta verify_unavailable: why it did not run
  uint64_t counting_events = 0;
  uint64_t checking_events = 0;
  uint64_t matched = 0;
  uint64_t named_differently = 0;
  uint64_t on_other_device = 0;
  uint64_t only_counting = 0;        // events the counting backend saw and the cross-check did not
  uint64_t only_checking = 0;        // and the reverse
  std::vector<Disagreement> groups;  // most events first

  bool ran() const { return !checking_backend.empty(); }
  uint64_t disagreements() const { return only_counting + only_checking; }
};

// Whether the trace comes from run --verify (meta verify_backend or verify_unavailable).
bool has_cross_check(const TraceFile& trace);

// The cross-check of a run --verify trace: reads both backends' events (read/cross_check.h), matches them
// and groups what is left, loading each group's stack with `load_stack`.
CrossCheck cross_check_trace(const TraceFile& trace, const std::function<const Stack&(int64_t)>& load_stack);

}  // namespace gmt::analysis
