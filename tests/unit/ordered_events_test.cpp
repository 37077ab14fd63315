// OrderedEvents: rows of the events table come out in (time_ns, id) order, as SQLite's sort would give them,
// from a scan in id order; a row displaced by more than the window raises EventsOutOfOrder, and
// analyze_trace then falls back to an exact order.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "analysis/model/analyze.h"
#include "analysis/model/report.h"
#include "analysis/read/ordered_events.h"
#include "trace_builder.h"

namespace gmt::analysis {
namespace {

using test_support::TraceBuilder;

const char* const kSelect = "SELECT e.id, e.time_ns, e.address, f.device_free FROM events e "
                            "LEFT JOIN alloc_failures f ON f.event_id = e.id";

// (id, time relative to the start) of every row, in the order the reader hands them out.
std::vector<std::pair<int64_t, int64_t>> read_all(const TraceFile& trace, EventOrder order, size_t window) {
  OrderedEvents events(trace, kSelect, order, window);
  std::vector<std::pair<int64_t, int64_t>> rows;
  while (events.step()) rows.emplace_back(events.column_int(0), events.column_int(1) - TraceBuilder::kStartNs);
  return rows;
}

TEST(OrderedEventsTest, ReordersWithinTheWindowLikeSqliteSorts) {
  TraceBuilder builder;
  builder.alloc(10, 0x1000, 256);  // id 1
  builder.alloc(30, 0x2000, 256);  // id 2
  builder.alloc(20, 0x3000, 256);  // id 3: one place early
  builder.alloc(30, 0x4000, 256);  // id 4: ties with id 2, comes after it
  builder.alloc(15, 0x5000, 256);  // id 5: three places early (passes 3 rows: a window of 4)
  builder.alloc(40, 0x6000, 256);  // id 6
  TraceFile trace = builder.open();
  std::vector<std::pair<int64_t, int64_t>> expected = {{1, 10}, {5, 15}, {3, 20}, {2, 30}, {4, 30}, {6, 40}};
  EXPECT_EQ(read_all(trace, EventOrder::RecordingWindow, 4), expected);
  EXPECT_EQ(read_all(trace, EventOrder::RecordingWindow, 100), expected);
  EXPECT_EQ(read_all(trace, EventOrder::SortedBySqlite, 1), expected);
}

TEST(OrderedEventsTest, ARowDisplacedBeyondTheWindowIsRefused) {
  TraceBuilder builder;
  builder.alloc(10, 0x1000, 256);
  builder.alloc(20, 0x2000, 256);
  builder.alloc(30, 0x3000, 256);
  builder.alloc(5, 0x4000, 256);  // belongs before all three: needs a window of 4
  TraceFile trace = builder.open();
  EXPECT_THROW(read_all(trace, EventOrder::RecordingWindow, 3), EventsOutOfOrder);
  EXPECT_EQ(read_all(trace, EventOrder::RecordingWindow, 4).front(), (std::pair<int64_t, int64_t>{4, 5}));
}

TEST(OrderedEventsTest, NullColumnsStayNullAndZeroStaysZero) {
  TraceBuilder builder;
  builder.alloc(10, 0, 0);               // address 0, no failure row: device_free NULL
  builder.alloc_failed(20, 1 << 20, 2);  // a failure row
  TraceFile trace = builder.open();
  OrderedEvents events(trace, kSelect, EventOrder::RecordingWindow, 4);
  ASSERT_TRUE(events.step());
  EXPECT_EQ(events.column_int(2), 0);
  EXPECT_FALSE(events.column_is_null(2));
  EXPECT_TRUE(events.column_is_null(3));
  ASSERT_TRUE(events.step());
  EXPECT_FALSE(events.step());
}

// A trace that claims time order (meta events_time_ordered = 1, read with a small window) but holds a free
// recorded long after its time, as a stalled thread writes it in an older trace: analyze_trace must still
// count it in time order (the free at t=5 comes before the re-allocation of the same address at t=10...)
// and end with exactly the bytes a sorted reading gives.
TEST(OrderedEventsTest, AnalyzeTraceFallsBackToAnExactOrder) {
  TraceBuilder builder;
  builder.meta(schema::meta::kEventsTimeOrdered, "1");
  builder.alloc(1, 0x1000, 1024);
  for (int i = 0; i < 5000; ++i) {  // more rows than the small window between the free's time and its row
    builder.alloc(10 + 2 * i, 0x100000 + 0x1000 * i, 512);
    builder.free(11 + 2 * i, 0x100000 + 0x1000 * i);
  }
  builder.free(5, 0x1000);  // recorded last, happened early
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  EXPECT_EQ(report.totals.allocations, 5001u);
  EXPECT_EQ(report.totals.frees, 5001u);
  EXPECT_EQ(report.totals.unmatched_frees, 0u);
  EXPECT_EQ(report.totals.leaked_bytes, 0u);
  EXPECT_EQ(report.totals.peak_bytes, 1024u);  // 0x1000 is freed at t=5, before the others start (not 1536)
}

}  // namespace
}  // namespace gmt::analysis
