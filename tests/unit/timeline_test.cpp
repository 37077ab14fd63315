// The timeline and the stacks live at each device's peak, on handmade traces: every expected number is
// worked out by hand in the comments.
#include <gtest/gtest.h>

#include <algorithm>

#include "analysis/model/analyze.h"
#include "analysis/model/report.h"
#include "analysis/render/render_text_parts.h"
#include "trace_builder.h"

namespace gmt::analysis {
namespace {

using schema::Api;
using schema::MemoryKind;
using test_support::TraceBuilder;

constexpr int64_t kMiB = 1024 * 1024;

Report analyze(TraceBuilder& builder, const AnalyzeOptions& options = {}) {
  TraceFile trace = builder.open();
  return analyze_trace(trace, options);
}

void expect_bucket(const TimelineBucket& bucket, int64_t start, uint64_t min, uint64_t max) {
  EXPECT_EQ(bucket.start_ns, start);
  EXPECT_EQ(bucket.min_bytes, min) << "bucket at " << start;
  EXPECT_EQ(bucket.max_bytes, max) << "bucket at " << start;
}

TEST(TimelineTest, BucketsHoldTheExactMinAndMaxOfEachInterval) {
  TraceBuilder builder;
  // A run of 999 ns: [0, 999] is 1000 ns; 7 changes get the minimum of 100 buckets, of 10 ns.
  builder.meta(schema::meta::kEndMonotonicNs, std::to_string(TraceBuilder::kStartNs + 999));
  builder.alloc(5, 0xa000, 100);  // bucket 0: 0 carried in, then 100
  builder.alloc(25, 0xb000, 50);  // bucket 2: 100 carried in, 150, then 50
  builder.free(27, 0xa000);
  builder.alloc(31, 0xc000, 1000);  // bucket 3: a spike that lasts no time at all still shows
  builder.free(31, 0xc000);
  builder.alloc(45, 0xd000, 7, 0, Api::cudaMallocManaged, MemoryKind::Managed);       // bucket 4
  builder.alloc(995, 0xe000, 3, 0, Api::cudaMallocHost, MemoryKind::HostPinned, -1);  // the last bucket
  Report report = analyze(builder);
  const Timeline& timeline = report.timeline;
  EXPECT_EQ(timeline.bucket_ns, 10);
  ASSERT_EQ(timeline.total.size(), 100u);
  expect_bucket(timeline.total[0], 0, 0, 100);
  expect_bucket(timeline.total[1], 10, 100, 100);
  expect_bucket(timeline.total[2], 20, 50, 150);
  expect_bucket(timeline.total[3], 30, 50, 1050);
  expect_bucket(timeline.total[4], 40, 50, 57);
  expect_bucket(timeline.total[5], 50, 57, 57);
  expect_bucket(timeline.total[98], 980, 57, 57);
  expect_bucket(timeline.total[99], 990, 57, 60);

  // Series by device, then kind: host memory (-1) first.
  ASSERT_EQ(timeline.series.size(), 3u);
  EXPECT_EQ(timeline.series[0].device, -1);
  EXPECT_EQ(timeline.series[0].memory_kind, MemoryKind::HostPinned);
  expect_bucket(timeline.series[0].buckets[98], 980, 0, 0);
  expect_bucket(timeline.series[0].buckets[99], 990, 0, 3);
  EXPECT_EQ(timeline.series[1].device, 0);
  EXPECT_EQ(timeline.series[1].memory_kind, MemoryKind::Device);
  expect_bucket(timeline.series[1].buckets[3], 30, 50, 1050);
  expect_bucket(timeline.series[1].buckets[4], 40, 50, 50);
  EXPECT_EQ(timeline.series[2].memory_kind, MemoryKind::Managed);
  expect_bucket(timeline.series[2].buckets[3], 30, 0, 0);
  expect_bucket(timeline.series[2].buckets[4], 40, 0, 7);
  expect_bucket(timeline.series[2].buckets[99], 990, 7, 7);
  for (const TimelineSeries& series : timeline.series) EXPECT_EQ(series.buckets.size(), 100u);
}

TEST(TimelineTest, ManyChangesGetAtMostTheMaximumOfBuckets) {
  TraceBuilder builder;  // 5 s; 3000 changes: 1000 buckets of 5000001 ns ([0, 5e9] is 5e9 + 1 ns)
  builder.begin();
  for (int i = 0; i < 1500; ++i) {
    builder.alloc(int64_t{i} * 3'000'000, 0xa000, 10);
    builder.free(int64_t{i} * 3'000'000 + 1, 0xa000);
  }
  builder.commit();
  Report report = analyze(builder);
  EXPECT_EQ(report.timeline.bucket_ns, 5'000'001);
  ASSERT_EQ(report.timeline.total.size(), 1000u);
  expect_bucket(report.timeline.total[0], 0, 0, 10);
  expect_bucket(report.timeline.total[999], int64_t{999} * 5'000'001, 0, 0);  // after the last change at 4.497 s
}

TEST(TimelineTest, ShortRunsGetOneNanosecondBucketsAndFewChangesTheMinimum) {
  {
    TraceBuilder builder;
    builder.meta(schema::meta::kEndMonotonicNs, std::to_string(TraceBuilder::kStartNs + 9));
    builder.alloc(3, 0xa000, 10);
    builder.free(6, 0xa000);
    Report report = analyze(builder);
    EXPECT_EQ(report.timeline.bucket_ns, 1);
    ASSERT_EQ(report.timeline.total.size(), 10u);  // 0 .. 9
    expect_bucket(report.timeline.total[2], 2, 0, 0);
    expect_bucket(report.timeline.total[3], 3, 0, 10);
    expect_bucket(report.timeline.total[5], 5, 10, 10);
    expect_bucket(report.timeline.total[6], 6, 0, 10);
    expect_bucket(report.timeline.total[9], 9, 0, 0);
  }
  {
    TraceBuilder builder;  // 5 s with one change: 5e9 + 1 ns in 100 buckets of 50000001 ns
    builder.alloc(4'999'999'999, 0xa000, 10);
    Report report = analyze(builder);
    EXPECT_EQ(report.timeline.bucket_ns, 50'000'001);
    ASSERT_EQ(report.timeline.total.size(), 100u);
    expect_bucket(report.timeline.total[99], int64_t{99} * 50'000'001, 0, 10);
  }
}

TEST(TimelineTest, EventsAfterTheRecordedEndExtendTheTimeline) {
  TraceBuilder builder;
  builder.meta(schema::meta::kEndMonotonicNs, std::to_string(TraceBuilder::kStartNs + 9));
  builder.alloc(19, 0xa000, 10);  // recorded after the end (a library's exit code)
  Report report = analyze(builder);
  ASSERT_EQ(report.timeline.total.size(), 20u);
  expect_bucket(report.timeline.total[19], 19, 0, 10);
}

TEST(TimelineTest, NothingLiveGivesAnEmptyTimeline) {
  TraceBuilder builder;
  builder.alloc_failed(10, kMiB, 2);
  Report report = analyze(builder);
  EXPECT_EQ(report.timeline.bucket_ns, 0);
  EXPECT_TRUE(report.timeline.total.empty());
  EXPECT_TRUE(report.timeline.series.empty());
  EXPECT_TRUE(report.peaks.empty());
}

TEST(PeakStacksTest, EachDevicePeakListsWhatWasLiveThenLargestFirst) {
  TraceBuilder builder;
  int64_t module = builder.module("/app", 0x1000, 0x10000);
  int64_t weights = builder.stack({0x1100});
  int64_t activations = builder.stack({0x1200});
  int64_t activations_again = builder.stack({0x1210});  // another pc of the same source line: one group
  int64_t late = builder.stack({0x1300});
  builder.symbol(0x1100, "load_weights", "a.cu", 10, module);
  builder.symbol(0x1200, "forward", "a.cu", 20, module);
  builder.symbol(0x1210, "forward", "a.cu", 20, module);
  builder.symbol(0x1300, "late", "a.cu", 30, module);
  builder.alloc(10, 0x10000, 8 * kMiB, weights);
  builder.alloc(20, 0x20000, 2 * kMiB, activations);
  builder.alloc(30, 0x30000, 3 * kMiB, activations_again);
  builder.alloc(35, 0x90000, 1 * kMiB, late, Api::cudaMalloc, MemoryKind::Device, 1);  // device 1
  builder.free(40, 0x20000);
  builder.free(50, 0x30000);                   // device 0 peaked at 13 MiB at 30
  builder.alloc(60, 0x40000, 4 * kMiB, late);  // 12 MiB: below the peak, so not part of it
  builder.free(70, 0x90000);
  Report report = analyze(builder);

  ASSERT_EQ(report.peaks.size(), 2u);
  const DevicePeak& zero = report.peaks[0];
  EXPECT_EQ(zero.device, 0);
  EXPECT_EQ(zero.bytes, uint64_t(13 * kMiB));
  EXPECT_EQ(zero.time_ns, 30);
  EXPECT_EQ(zero.stack_groups, 2u);
  ASSERT_EQ(zero.stacks.size(), 2u);
  EXPECT_EQ(zero.stacks[0].stack.id, weights);
  EXPECT_EQ(zero.stacks[0].bytes, uint64_t(8 * kMiB));
  EXPECT_EQ(zero.stacks[0].count, 1u);
  ASSERT_EQ(zero.stacks[0].stack.frames.size(), 1u);
  EXPECT_EQ(zero.stacks[0].stack.frames[0].function, "load_weights");
  EXPECT_EQ(zero.stacks[1].stack.id, activations);
  EXPECT_EQ(zero.stacks[1].bytes, uint64_t(5 * kMiB));
  EXPECT_EQ(zero.stacks[1].count, 2u);
  EXPECT_EQ(zero.stacks[1].stack_ids, (std::vector<int64_t>{activations, activations_again}));

  const DevicePeak& one = report.peaks[1];
  EXPECT_EQ(one.device, 1);
  EXPECT_EQ(one.bytes, uint64_t(1 * kMiB));
  EXPECT_EQ(one.time_ns, 35);
  ASSERT_EQ(one.stacks.size(), 1u);
  EXPECT_EQ(one.stacks[0].stack.id, late);

  // The total peak is unchanged by all this: 14 MiB at 35 (both devices).
  EXPECT_EQ(report.totals.peak_bytes, uint64_t(14 * kMiB));
  EXPECT_EQ(report.totals.peak_time_ns, 35);
}

// Sizes above the change log's 1 GiB part size (analysis/model/timeline.h) are logged in parts: the peak, its stacks
// and their counts, and the timeline must be exactly those of one change each.
TEST(PeakStacksTest, AllocationsLargerThanALogPartAreCountedOnce) {
  constexpr int64_t kGiB = 1024 * kMiB;
  TraceBuilder builder;
  int64_t huge = builder.stack({0x1100});
  int64_t small = builder.stack({0x1200});
  builder.alloc(10, 0x10000000000, 5 * kGiB + 3, huge);  // 6 parts: 5 of 1 GiB - 1, one of 8 B
  builder.alloc(20, 0x20000000000, 3 * kGiB, huge);      // 4 parts
  builder.alloc(30, 0x1000, 1 * kMiB, small);
  builder.free(40, 0x10000000000);
  builder.free(50, 0x1000);
  Report report = analyze(builder);

  // Peak at 30: 8 GiB + 3 B + 1 MiB.
  ASSERT_EQ(report.peaks.size(), 1u);
  EXPECT_EQ(report.peaks[0].bytes, uint64_t(8 * kGiB + 3 + kMiB));
  EXPECT_EQ(report.peaks[0].time_ns, 30);
  ASSERT_EQ(report.peaks[0].stacks.size(), 2u);
  EXPECT_EQ(report.peaks[0].stacks[0].stack.id, huge);
  EXPECT_EQ(report.peaks[0].stacks[0].bytes, uint64_t(8 * kGiB + 3));
  EXPECT_EQ(report.peaks[0].stacks[0].count, 2u);
  EXPECT_EQ(report.peaks[0].stacks[1].count, 1u);
  // The timeline ends at the level of the 3 GiB block, and its highest bucket holds the peak.
  ASSERT_FALSE(report.timeline.total.empty());
  EXPECT_EQ(report.timeline.total.back().max_bytes, uint64_t(3 * kGiB));
  uint64_t highest = 0;
  for (const TimelineBucket& bucket : report.timeline.total) highest = std::max(highest, bucket.max_bytes);
  EXPECT_EQ(highest, uint64_t(8 * kGiB + 3 + kMiB));
  EXPECT_EQ(report.totals.leaked_bytes, uint64_t(3 * kGiB));
}

TEST(PeakStacksTest, TopStacksCutsTheListButCountsEveryGroup) {
  TraceBuilder builder;
  for (int i = 0; i < 5; ++i) {
    int64_t stack = builder.stack({static_cast<uint64_t>(0x1000 + i)});
    builder.alloc(10 + i, 0x10000 * (i + 1), (i + 1) * kMiB, stack);
  }
  AnalyzeOptions options;
  options.top_stacks = 2;
  Report report = analyze(builder, options);
  ASSERT_EQ(report.peaks.size(), 1u);
  EXPECT_EQ(report.peaks[0].stack_groups, 5u);
  ASSERT_EQ(report.peaks[0].stacks.size(), 2u);
  EXPECT_EQ(report.peaks[0].stacks[0].bytes, uint64_t(5 * kMiB));
  EXPECT_EQ(report.peaks[0].stacks[1].bytes, uint64_t(4 * kMiB));
}

TEST(PeakStacksTest, HostMemoryComesAfterTheDevices) {
  TraceBuilder builder;
  builder.alloc(10, 0x1000, 64, 0, Api::cudaMallocHost, MemoryKind::HostPinned, -1);
  builder.alloc(20, 0x2000, 32);
  Report report = analyze(builder);
  ASSERT_EQ(report.peaks.size(), 2u);
  EXPECT_EQ(report.peaks[0].device, 0);
  EXPECT_EQ(report.peaks[1].device, -1);
}

TEST(SparklineTest, EachMarkIsTheHighestLevelItCovers) {
  auto buckets = [](std::vector<uint64_t> maxima) {
    std::vector<TimelineBucket> result;
    for (uint64_t max : maxima) result.push_back(TimelineBucket{0, 0, max});
    return result;
  };
  EXPECT_EQ(sparkline(buckets({0, 1, 8, 4}), 60), " ▁█▄");
  EXPECT_EQ(sparkline(buckets({0, 1, 8, 4}), 2), "▁█");  // (0, 1) and (8, 4)
  EXPECT_EQ(sparkline(buckets(std::vector<uint64_t>(1000, 5)), 60), [] {
    std::string full;
    for (int i = 0; i < 60; ++i) full += "█";
    return full;
  }());
  EXPECT_EQ(sparkline({}, 60), "");
}

}  // namespace
}  // namespace gmt::analysis
