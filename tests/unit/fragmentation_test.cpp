// Fragmentation: the gap bookkeeping alone (against a brute-force count), at the peak and the end of a
// handmade trace, OOM forensics at failed allocations, and the pools' reserved-vs-used samples.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "analysis/model/analyze.h"
#include "analysis/model/fragmentation.h"
#include "analysis/model/report.h"
#include "trace_builder.h"

namespace gmt::analysis {
namespace {

using schema::Api;
using schema::MemoryKind;
using test_support::TraceBuilder;

constexpr int64_t kMiB = 1024 * 1024;
constexpr int64_t kGiB = 1024 * kMiB;

Report analyze(TraceBuilder& builder) {
  TraceFile trace = builder.open();
  return analyze_trace(trace);
}

TEST(GapTrackerTest, GapsBetweenNeighboursAreKeptUpToDate) {
  GapTracker gaps;
  gaps.insert(0x1000, 0x200);
  gaps.insert(0x8000, 0x1000);
  gaps.insert(0x3000, 0x200);
  // Live: [0x1000, 0x1200) [0x3000, 0x3200) [0x8000, 0x9000). Gaps 0x1e00 and 0x4e00.
  FragmentationStats stats = gaps.stats(7);
  EXPECT_EQ(stats.time_ns, 7);
  EXPECT_EQ(stats.allocations, 3u);
  EXPECT_EQ(stats.span_bytes, 0x8000u);
  EXPECT_EQ(stats.free_bytes, 0x1e00u + 0x4e00u);
  EXPECT_EQ(stats.largest_gap_bytes, 0x4e00u);
  EXPECT_DOUBLE_EQ(stats.ratio, 1.0 - double(0x4e00) / double(0x1e00 + 0x4e00));

  gaps.erase(0x3000);  // the two gaps merge into one: nothing is fragmented any more
  stats = gaps.stats(8);
  EXPECT_EQ(stats.free_bytes, 0x6e00u);
  EXPECT_EQ(stats.largest_gap_bytes, 0x6e00u);
  EXPECT_DOUBLE_EQ(stats.ratio, 0.0);

  gaps.erase(0x1000);
  stats = gaps.stats(9);
  EXPECT_EQ(stats.allocations, 1u);
  EXPECT_EQ(stats.span_bytes, 0x1000u);
  EXPECT_EQ(stats.free_bytes, 0u);
  gaps.erase(0x5555);  // not live: ignored
  gaps.erase(0x8000);
  EXPECT_TRUE(gaps.empty());
  EXPECT_EQ(gaps.stats(10).span_bytes, 0u);
}

TEST(GapTrackerTest, AlignmentPaddingAndOverlapsAreNoGap) {
  GapTracker gaps;
  gaps.insert(0x10000, 1000);    // ends at 0x10000 + 1000, rounded up to 512: 0x10400
  gaps.insert(0x10400, 512);     // right after the padding: no gap
  gaps.insert(0x10500, 0x1000);  // overlaps the one before (a damaged trace): no gap, no crash
  gaps.insert(0x20000, 16);
  FragmentationStats stats = gaps.stats(0);
  EXPECT_EQ(stats.largest_gap_bytes, 0x20000u - 0x11600u);  // 0x10600 + 0x1000 = 0x11600
  EXPECT_EQ(stats.free_bytes, 0x20000u - 0x11600u);
  gaps.insert(0x10400, 256);  // the same address again replaces it
  EXPECT_EQ(gaps.stats(0).allocations, 4u);
}

TEST(GapTrackerTest, AgreesWithABruteForceCountUnderRandomChurn) {
  std::mt19937_64 random(42);
  GapTracker gaps;
  std::map<uint64_t, uint64_t> live;
  for (int step = 0; step < 5000; ++step) {
    if (live.empty() || random() % 3 != 0) {
      const uint64_t address = (random() % 4096) * 4096;
      const uint64_t size = 512 * (1 + random() % 8);
      if (live.count(address)) continue;
      live[address] = size;
      gaps.insert(address, size);
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(random() % live.size()));
      gaps.erase(it->first);
      live.erase(it);
    }
    if (step % 97 != 0) continue;
    uint64_t free_bytes = 0;
    uint64_t largest = 0;
    for (auto it = live.begin(); it != live.end() && std::next(it) != live.end(); ++it) {
      const uint64_t end = (it->first + it->second + 511) / 512 * 512;
      const uint64_t next = std::next(it)->first;
      const uint64_t gap = next > end ? next - end : 0;
      free_bytes += gap;
      largest = std::max(largest, gap);
    }
    const FragmentationStats stats = gaps.stats(0);
    ASSERT_EQ(stats.allocations, live.size());
    ASSERT_EQ(stats.free_bytes, free_bytes) << "step " << step;
    ASSERT_EQ(stats.largest_gap_bytes, largest) << "step " << step;
  }
}

TEST(FragmentationTest, AtThePeakAndAtTheEndOfEachDevice) {
  TraceBuilder builder;
  // Device 0: four 1 MiB blocks side by side (the peak, no gap), then the 2nd and 3rd freed: one 2 MiB gap.
  for (int i = 0; i < 4; ++i) builder.alloc(10 + i, 0x10000000 + i * kMiB, kMiB);
  builder.free(20, 0x10000000 + 1 * kMiB);
  builder.free(21, 0x10000000 + 2 * kMiB);
  // Device 1: blocks of 1, 2 and 1 MiB with 1 MiB and 3 MiB gaps between them.
  builder.alloc(30, 0x90000000, kMiB, 0, Api::cudaMalloc, MemoryKind::Device, 1);
  builder.alloc(31, 0x90000000 + 2 * kMiB, 2 * kMiB, 0, Api::cudaMalloc, MemoryKind::Device, 1);
  builder.alloc(32, 0x90000000 + 7 * kMiB, kMiB, 0, Api::cudaMalloc, MemoryKind::Device, 1);
  // Managed memory is not device memory here: no gap tracking for it.
  builder.alloc(40, 0x50000000, kMiB, 0, Api::cudaMallocManaged, MemoryKind::Managed);
  Report report = analyze(builder);

  ASSERT_EQ(report.fragmentation.size(), 2u);
  const DeviceFragmentation& zero = report.fragmentation[0];
  EXPECT_EQ(zero.device, 0);
  ASSERT_TRUE(zero.at_peak.has_value());
  EXPECT_EQ(zero.at_peak->time_ns, 13);
  EXPECT_EQ(zero.at_peak->allocations, 4u);
  EXPECT_EQ(zero.at_peak->free_bytes, 0u);
  EXPECT_EQ(zero.at_peak->ratio, 0.0);
  EXPECT_EQ(zero.at_end.allocations, 2u);
  EXPECT_EQ(zero.at_end.span_bytes, uint64_t(4 * kMiB));
  EXPECT_EQ(zero.at_end.free_bytes, uint64_t(2 * kMiB));
  EXPECT_EQ(zero.at_end.largest_gap_bytes, uint64_t(2 * kMiB));
  EXPECT_EQ(zero.at_end.ratio, 0.0);  // one gap: the free memory is all in one piece

  const DeviceFragmentation& one = report.fragmentation[1];
  EXPECT_EQ(one.device, 1);
  EXPECT_EQ(one.at_end.span_bytes, uint64_t(8 * kMiB));
  EXPECT_EQ(one.at_end.free_bytes, uint64_t(4 * kMiB));
  EXPECT_EQ(one.at_end.largest_gap_bytes, uint64_t(3 * kMiB));
  EXPECT_DOUBLE_EQ(one.at_end.ratio, 0.25);  // 1 - 3/4
  EXPECT_EQ(one.at_end.time_ns, report.trace.duration_ns);
}

TEST(FragmentationTest, EachFailureIsLabelledWithItsGapAndHolders) {
  TraceBuilder builder;
  int64_t blocks = builder.stack({0x1100});
  int64_t other = builder.stack({0x1200});
  int64_t failing = builder.stack({0x1300});
  // Eight 4 MiB blocks; every other one freed: four 4 MiB holes, three of them between live blocks.
  for (int i = 0; i < 8; ++i) builder.alloc(10 + i, 0x10000000 + i * 4 * kMiB, 4 * kMiB, blocks);
  for (int i = 1; i < 8; i += 2) builder.free(20 + i, 0x10000000 + i * 4 * kMiB);
  builder.alloc(30, 0x70000000, kMiB, other, Api::cudaMallocHost, MemoryKind::HostPinned, -1);
  // 8 MiB fails with 16 MiB free: fragmentation. 32 MiB fails with 16 MiB free: out of memory.
  builder.alloc_failed(40, 8 * kMiB, 2, failing, 16 * kMiB, 32 * kMiB);
  builder.alloc_failed(41, 32 * kMiB, 2, failing, 16 * kMiB, 32 * kMiB);
  builder.alloc_failed(42, 8 * kMiB, 2, failing);                       // free memory not recorded
  builder.alloc_failed(43, 0, 1, failing);                              // cudaErrorInvalidValue: not about memory
  builder.alloc_failed(44, kMiB, 2, failing, 16 * kMiB, 32 * kMiB, 3);  // a device with no allocation
  Report report = analyze(builder);

  ASSERT_EQ(report.failures.size(), 5u);
  const AllocFailure& fragmented = report.failures[0];
  EXPECT_EQ(fragmented.label, "fragmentation");
  ASSERT_TRUE(fragmented.fragmentation.has_value());
  EXPECT_EQ(fragmented.fragmentation->time_ns, 40);
  EXPECT_EQ(fragmented.fragmentation->largest_gap_bytes, uint64_t(4 * kMiB));
  EXPECT_EQ(fragmented.fragmentation->free_bytes, uint64_t(12 * kMiB));
  EXPECT_EQ(fragmented.fragmentation->allocations, 4u);
  ASSERT_EQ(fragmented.top_stacks.size(), 1u);  // device 0 only: the pinned host buffer is not on it
  EXPECT_EQ(fragmented.top_stacks[0].stack.id, blocks);
  EXPECT_EQ(fragmented.top_stacks[0].bytes, uint64_t(16 * kMiB));
  EXPECT_EQ(fragmented.top_stacks[0].count, 4u);

  EXPECT_EQ(report.failures[1].label, "out of memory");
  EXPECT_EQ(report.failures[2].label, "unknown");
  EXPECT_EQ(report.failures[3].label, "other error");
  EXPECT_EQ(report.failures[4].label, "fragmentation");
  EXPECT_FALSE(report.failures[4].fragmentation.has_value());  // nothing ever allocated on device 3
  EXPECT_TRUE(report.failures[4].top_stacks.empty());
}

TEST(FragmentationTest, LabelRule) {
  AllocFailure failure;
  failure.error = 2;
  failure.requested_bytes = 100;
  failure.device_free = 101;
  EXPECT_EQ(failure_label(failure), "fragmentation");
  failure.device_free = 100;  // exactly the request: no room for anything else, call it out of memory
  EXPECT_EQ(failure_label(failure), "out of memory");
  failure.device_free = -1;
  EXPECT_EQ(failure_label(failure), "out of memory");
  failure.device_free.reset();
  EXPECT_EQ(failure_label(failure), "unknown");
  failure.error = 700;
  EXPECT_EQ(failure_label(failure), "other error");
}

const char* const kPoolUsageTable =
    "CREATE TABLE IF NOT EXISTS pool_usage (time_ns INTEGER NOT NULL, pool INTEGER NOT NULL, device INTEGER "
    "NOT NULL, reserved_bytes INTEGER NOT NULL, used_bytes INTEGER NOT NULL)";

TEST(PoolUsageTest, PerPoolPeaksLastValuesAndMostUnused) {
  TraceBuilder builder;
  builder.exec(kPoolUsageTable);
  auto sample = [&](int64_t t, int64_t pool, int64_t device, int64_t reserved, int64_t used) {
    builder.exec("INSERT INTO pool_usage VALUES (" + std::to_string(TraceBuilder::kStartNs + t) + ", " +
                 std::to_string(pool) + ", " + std::to_string(device) + ", " + std::to_string(reserved) + ", " +
                 std::to_string(used) + ")");
  };
  sample(10, 0x5000, 0, 32 * kMiB, 30 * kMiB);
  sample(20, 0x5000, 0, 64 * kMiB, 16 * kMiB);  // 48 MiB unused: the most
  sample(30, 0x5000, 0, 64 * kMiB, 60 * kMiB);
  sample(40, 0x5000, 0, 40 * kMiB, 8 * kMiB);
  sample(15, 0x9000, 1, 2 * kMiB, 2 * kMiB);
  Report report = analyze(builder);
  ASSERT_TRUE(report.pools.has_value());
  ASSERT_EQ(report.pools->size(), 2u);
  const PoolUsage& pool = (*report.pools)[0];
  EXPECT_EQ(pool.pool, 0x5000);
  EXPECT_EQ(pool.device, 0);
  EXPECT_EQ(pool.samples, 4u);
  EXPECT_EQ(pool.peak_reserved_bytes, uint64_t(64 * kMiB));
  EXPECT_EQ(pool.peak_used_bytes, uint64_t(60 * kMiB));
  EXPECT_EQ(pool.last_reserved_bytes, uint64_t(40 * kMiB));
  EXPECT_EQ(pool.last_used_bytes, uint64_t(8 * kMiB));
  EXPECT_EQ(pool.max_unused_bytes, uint64_t(48 * kMiB));
  EXPECT_EQ(pool.max_unused_time_ns, 20);
  const PoolUsage& other = (*report.pools)[1];
  EXPECT_EQ(other.device, 1);
  EXPECT_EQ(other.max_unused_bytes, 0u);
}

TEST(PoolUsageTest, ATraceWithoutTheTableHasNoPools) {
  TraceBuilder builder;
  builder.exec("DROP TABLE IF EXISTS pool_usage");  // a trace from before the table existed
  builder.alloc(10, 0x1000, 64);
  Report report = analyze(builder);
  EXPECT_FALSE(report.pools.has_value());
  EXPECT_EQ(report.totals.allocations, 1u);
}

TEST(PoolUsageTest, AnEmptyTableGivesNoPools) {
  TraceBuilder builder;
  builder.exec(kPoolUsageTable);
  Report report = analyze(builder);
  ASSERT_TRUE(report.pools.has_value());
  EXPECT_TRUE(report.pools->empty());
}

}  // namespace
}  // namespace gmt::analysis
