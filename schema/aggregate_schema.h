// The aggregate trace (`run --aggregate`, schema v11): the tables and meta keys a bounded trace adds to the
// full trace's (schema/trace_schema.h). docs/trace-format.md "Aggregate traces" says what each row means and
// why the file stays bounded; recorder/aggregator.h writes them, analysis/read/aggregate.h reads them.
//
// An aggregate trace is an ordinary trace whose `events` table is a subsequence of the full trace's: every
// event keeps the id it would have had there (so id order is still time order), and an allocation's Alloc and
// Free rows are kept only when the allocation was live at a moment the analyses look at (the end, a peak of any
// tracked level, an allocation failure). Everything else is summarized per time window in the tables below.
#pragma once

namespace gmt::schema::aggregate {

// meta.trace_mode: "aggregate" for a bounded trace; absent (or "full") for a full one.
inline constexpr const char* kTraceModeKey = "trace_mode";
inline constexpr const char* kTraceModeAggregate = "aggregate";

// The windows: window i covers [aggregate_t0_ns + i * aggregate_window_ns, + aggregate_window_ns). The window length
// doubles (and windows merge pairwise) whenever the run outgrows kMaxWindows of them.
inline constexpr const char* kWindowNsKey = "aggregate_window_ns";
inline constexpr const char* kT0NsKey = "aggregate_t0_ns";
// Events the writer saw, by how they ended up: every event handed to the writer, and the rows kept in `events`.
inline constexpr const char* kEventsSeenKey = "aggregate_events_seen";
inline constexpr const char* kEventsKeptKey = "aggregate_events_kept";
// Synchronize events are counted, not kept (nothing in the analysis reads them).
inline constexpr const char* kSynchronizeEventsKey = "aggregate_synchronize_events";
// Failures whose live set is kept in full (the first kMaxFailuresWithContext); later ones keep their own row only.
inline constexpr const char* kFailuresWithContextKey = "aggregate_failures_with_context";
inline constexpr const char* kFailuresWithoutContextKey = "aggregate_failures_without_context";

inline constexpr int kMaxWindows = 256;
inline constexpr long long kFirstWindowNs = 1000000000;  // 1 s
inline constexpr int kMaxFailuresWithContext = 64;
inline constexpr int kMaxRangeEndsKept = 1024;  // per range name: the series of live bytes at its ends, decimated

// Levels of aggregate_levels.level and aggregate_windows.level.
inline constexpr int kLevelCuda = 0;     // CUDA-level allocations (every backend's Alloc/Free)
inline constexpr int kLevelBlock = 1;    // a framework's blocks (memory kinds TensorBlock, HeapBlock)
inline constexpr int kLevelSegment = 2;  // a framework's segments (SegmentAlloc/SegmentFree)

inline constexpr const char* kCreateAggregateSql = R"SQL(
CREATE TABLE IF NOT EXISTS aggregate_windows (  -- per window and allocating stack: what was allocated and freed
  window      INTEGER NOT NULL,
  stack_id    INTEGER NOT NULL,  -- the allocating stack (frees are counted under their allocation's stack)
  level       INTEGER NOT NULL,  -- kLevelCuda, kLevelBlock, kLevelSegment
  memory_kind INTEGER NOT NULL,
  device      INTEGER NOT NULL,
  allocs      INTEGER NOT NULL,
  alloc_bytes INTEGER NOT NULL,
  frees       INTEGER NOT NULL,  -- frees made in this window of allocations made by this stack (in any window)
  free_bytes  INTEGER NOT NULL,
  PRIMARY KEY (window, stack_id, level, memory_kind, device)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS aggregate_levels (  -- live bytes per window: lowest, highest and at the window's end
  window     INTEGER NOT NULL,
  level      INTEGER NOT NULL,  -- kLevelCuda: the counted kinds (as the report's peak); kLevelBlock: blocks
  device     INTEGER NOT NULL,
  low_bytes  INTEGER NOT NULL,
  high_bytes INTEGER NOT NULL,
  end_bytes  INTEGER NOT NULL,
  PRIMARY KEY (window, level, device)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS aggregate_ranges (  -- NVTX ranges per name and window (by the window of their end)
  window      INTEGER NOT NULL,
  domain_id   INTEGER NOT NULL,  -- strings.id, as ranges.domain_id
  name_id     INTEGER NOT NULL,
  repetitions INTEGER NOT NULL,
  total_ns    INTEGER NOT NULL,
  max_ns      INTEGER NOT NULL,
  PRIMARY KEY (window, domain_id, name_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS aggregate_range_ends (  -- per range name: live bytes allocated inside it, at its ends
  domain_id  INTEGER NOT NULL,
  name_id    INTEGER NOT NULL,
  repetition INTEGER NOT NULL,  -- 0-based count of its ends; a decimated series (every 2^k-th end) past 1024
  end_ns     INTEGER NOT NULL,
  live_bytes INTEGER NOT NULL,  -- as the full trace's "live inside" (docs/analysis.md, growth per repetition)
  PRIMARY KEY (domain_id, name_id, repetition)
) WITHOUT ROWID;
)SQL";

}  // namespace gmt::schema::aggregate
