// Growth detection: the rule on low watermarks alone, and on handmade traces with a leak, a steady state,
// too few events and a shutdown that frees everything.
#include <gtest/gtest.h>

#include "analysis/model/analyze.h"
#include "analysis/model/growth.h"
#include "analysis/model/report.h"
#include "trace_builder.h"

namespace gmt::analysis {
namespace {

using test_support::TraceBuilder;

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * kKiB;
constexpr int64_t kGiB = 1024 * kMiB;
constexpr int64_t kMs = 1'000'000;

Report analyze(TraceBuilder& builder) {
  TraceFile trace = builder.open();
  return analyze_trace(trace);
}

std::vector<uint64_t> mib(std::vector<double> values) {
  std::vector<uint64_t> bytes;
  for (double value : values) bytes.push_back(static_cast<uint64_t>(value * kMiB));
  return bytes;
}

TEST(GrowthRuleTest, ALineThatRisesInEveryWindowGrows) {
  // Windows of 0.5 s; after the warm-up (0), 10, 11, ..., 28 MiB: 1 MiB per window = 2 MiB/s.
  std::vector<double> lows{0};
  for (int i = 0; i < 19; ++i) lows.push_back(10 + i);
  GrowthDevice verdict = evaluate_growth(0, mib(lows), 0.5, 40 * kMiB);
  EXPECT_TRUE(verdict.growing);
  EXPECT_NEAR(verdict.slope_bytes_per_s, 2.0 * kMiB, 1.0);
  EXPECT_NEAR(verdict.fitted_rise_bytes, 18.0 * kMiB, 1.0);  // 18 steps of 1 MiB
  EXPECT_EQ(verdict.rising_steps, 18u);
  EXPECT_EQ(verdict.steps, 18u);
  EXPECT_EQ(verdict.threshold_bytes, uint64_t(2 * kMiB));  // 5% of 40 MiB is more than 1 MiB
}

TEST(GrowthRuleTest, FlatLowWatermarksDoNotGrow) {
  GrowthDevice verdict = evaluate_growth(0, mib({0, 64, 64, 64, 64, 64, 64, 64, 64, 64}), 0.5, 80 * kMiB);
  EXPECT_FALSE(verdict.growing);
  EXPECT_EQ(verdict.slope_bytes_per_s, 0.0);
  EXPECT_EQ(verdict.rising_steps, 0u);
}

TEST(GrowthRuleTest, TheWarmUpWindowIsLeftOut) {
  // Loading 64 MiB of weights in the first window is not growth.
  GrowthDevice verdict = evaluate_growth(0, mib({0, 64, 64, 64, 64, 64}), 1.0, 64 * kMiB);
  EXPECT_FALSE(verdict.growing);
  EXPECT_EQ(verdict.slope_bytes_per_s, 0.0);
}

TEST(GrowthRuleTest, NoiseAroundALevelDoesNotGrow) {
  // Up, down, up, down: half the steps rise, which is not "most".
  std::vector<double> lows{0};
  for (int i = 0; i < 19; ++i) lows.push_back(i % 2 == 0 ? 100 : 120);
  GrowthDevice verdict = evaluate_growth(0, mib(lows), 0.1, 200 * kMiB);
  EXPECT_EQ(verdict.rising_steps, 9u);
  EXPECT_EQ(verdict.steps, 18u);
  EXPECT_FALSE(verdict.growing);
}

TEST(GrowthRuleTest, ARiseBelowTheThresholdIsNotReported) {
  // 10 KiB per window for 18 steps = 180 KiB < max(1 MiB, 5% of the peak).
  std::vector<uint64_t> lows{0};
  for (int i = 0; i < 19; ++i) lows.push_back(uint64_t(64 * kMiB + i * 10 * kKiB));
  GrowthDevice verdict = evaluate_growth(0, lows, 0.1, 100 * kMiB);
  EXPECT_EQ(verdict.rising_steps, 18u);
  EXPECT_GT(verdict.slope_bytes_per_s, 0.0);
  EXPECT_EQ(verdict.threshold_bytes, uint64_t(5 * kMiB));
  EXPECT_FALSE(verdict.growing);
  // The same rise on a small device peak still needs 1 MiB.
  EXPECT_FALSE(evaluate_growth(0, lows, 0.1, 1 * kMiB).growing);
}

// The late-start rule: steady for most of the run, then a leak over the last windows only.
std::vector<double> steady_then(std::vector<double> tail) {
  std::vector<double> lows{0};
  while (lows.size() + tail.size() < 20) lows.push_back(64);
  lows.insert(lows.end(), tail.begin(), tail.end());
  return lows;
}

TEST(GrowthRuleTest, ALeakThatStartsLateIsFoundSinceItsFirstRise) {
  // 16 flat windows, then 68, 72, 76 MiB: 3 rises in 18 steps fail the main rule's quarter.
  GrowthDevice verdict = evaluate_growth(0, mib(steady_then({68, 72, 76})), 0.5, 80 * kMiB);
  EXPECT_EQ(verdict.rising_steps, 3u);
  EXPECT_EQ(verdict.steps, 18u);
  ASSERT_TRUE(verdict.growing);
  EXPECT_EQ(verdict.first_window, 16u);                     // the last flat window: the rise starts after it
  EXPECT_NEAR(verdict.slope_bytes_per_s, 8.0 * kMiB, 1.0);  // 4 MiB per 0.5 s window
  EXPECT_NEAR(verdict.fitted_rise_bytes, 12.0 * kMiB, 1.0);
}

TEST(GrowthRuleTest, LateRisesThatFallOrHappenOnceOrStaySmallAreNotGrowth) {
  EXPECT_FALSE(evaluate_growth(0, mib(steady_then({64, 64, 96})), 0.5, 100 * kMiB).growing);       // one jump
  EXPECT_FALSE(evaluate_growth(0, mib(steady_then({68, 66, 72, 76})), 0.5, 80 * kMiB).growing);    // a fall
  EXPECT_FALSE(evaluate_growth(0, mib(steady_then({64.1, 64.2, 64.3})), 0.5, 80 * kMiB).growing);  // < 4 MiB
  // Noise that rises three times without falling is a rise (and counted), but noise that comes back is not.
  EXPECT_FALSE(evaluate_growth(0, mib(steady_then({70, 64, 70, 64, 70})), 0.5, 80 * kMiB).growing);
}

TEST(GrowthTest, ALateLeakInATraceIsReportedWithItsStartAndStack) {
  // 100 steps of 1 ms with a 1 MiB temporary; from step 75 on, 4 MiB more leak each step (the last 5 windows).
  TraceBuilder builder;
  int64_t module = builder.module("/app", 0x1000, 0x10000);
  int64_t temporary = builder.stack({0x1200});
  int64_t leak = builder.stack({0x1300});
  builder.symbol(0x1200, "make_temporary", "loop.cu", 20, module);
  builder.symbol(0x1300, "late_cache", "loop.cu", 30, module);
  builder.begin();
  int64_t next_leak = 0x200000000;
  for (int i = 0; i < 100; ++i) {
    const int64_t t = kMs + i * kMs;
    builder.alloc(t, 0x180000000, 1 * kMiB, temporary);
    if (i >= 75) {
      builder.alloc(t + 100'000, next_leak, 4 * kMiB, leak);
      next_leak += 4 * kMiB;
    }
    builder.free(t + 500'000, 0x180000000);
  }
  builder.commit();
  Report report = analyze(builder);
  ASSERT_TRUE(report.growth.analyzed) << report.growth.reason;
  ASSERT_EQ(report.growth.findings.size(), 1u);
  const GrowthFinding& finding = report.growth.findings[0];
  EXPECT_TRUE(finding.late_start);
  // Steady until about step 75 (76 ms into the trace), then growing: the start is a window boundary
  // (windows of ~5 ms) at most one window before the first leak.
  EXPECT_GE(finding.start_time_ns, 70 * kMs);
  EXPECT_LE(finding.start_time_ns, 77 * kMs);
  ASSERT_FALSE(finding.stacks.empty());
  EXPECT_EQ(finding.stacks[0].stack.frames.at(0).function.value_or(""), "late_cache");
  const uint64_t grown = finding.stacks[0].end_bytes - finding.stacks[0].start_bytes;
  EXPECT_GT(grown, 0u);
  EXPECT_EQ(grown % (4 * kMiB), 0u);  // whole leaked steps
}

// `iterations` steps of 1 ms: a 1 MiB temporary allocated and freed, and (when leak_bytes > 0) a leak.
struct LoopTrace {
  int64_t temporary = 0;
  int64_t leak = 0;
  int64_t weights = 0;
};
LoopTrace build_loop(TraceBuilder& builder, int iterations, int64_t leak_bytes, bool free_at_shutdown = false) {
  LoopTrace stacks;
  int64_t module = builder.module("/app", 0x1000, 0x10000);
  stacks.weights = builder.stack({0x1100});
  stacks.temporary = builder.stack({0x1200});
  stacks.leak = builder.stack({0x1300});
  builder.symbol(0x1100, "load_weights", "loop.cu", 10, module);
  builder.symbol(0x1200, "make_temporary", "loop.cu", 20, module);
  builder.symbol(0x1300, "cache_result", "loop.cu", 30, module);
  builder.begin();
  builder.alloc(0, 0x100000000, 64 * kMiB, stacks.weights);
  int64_t next_leak = 0x200000000;
  for (int i = 0; i < iterations; ++i) {
    const int64_t t = kMs + i * kMs;
    builder.alloc(t, 0x180000000, 1 * kMiB, stacks.temporary);
    if (leak_bytes > 0) {
      builder.alloc(t + 100'000, next_leak, leak_bytes, stacks.leak);
      next_leak += leak_bytes;
    }
    builder.free(t + 500'000, 0x180000000);
  }
  if (free_at_shutdown) {
    for (int64_t address = 0x200000000; address < next_leak; address += leak_bytes) {
      builder.free(kMs + iterations * kMs, address);
    }
  }
  builder.commit();
  return stacks;
}

TEST(GrowthTest, ALeakInALoopIsFoundWithItsStackAndRate) {
  TraceBuilder builder;
  LoopTrace stacks = build_loop(builder, 100, 2 * kMiB);
  builder.alloc_failed(200 * kMs, 1 * kGiB, 2, 0, 200 * kMiB, 1 * kGiB);  // tells the device's total
  Report report = analyze(builder);
  const Growth& growth = report.growth;
  ASSERT_TRUE(growth.analyzed) << growth.reason;
  EXPECT_EQ(growth.windows, 20u);
  EXPECT_EQ(growth.start_ns, 0);
  EXPECT_EQ(growth.end_ns, 100 * kMs + 100'000);  // the last allocation: the leak of the last step
  ASSERT_EQ(growth.findings.size(), 1u);
  const GrowthFinding& finding = growth.findings[0];
  EXPECT_EQ(finding.device, 0);
  // 2 MiB per 1 ms step: 2000 MiB/s.
  EXPECT_NEAR(finding.rate_bytes_per_s, 2000.0 * kMiB, 0.05 * 2000.0 * kMiB);
  EXPECT_GT(finding.end_low_bytes, finding.start_low_bytes);
  EXPECT_LT(finding.start_time_ns, finding.end_time_ns);
  ASSERT_TRUE(finding.device_total_bytes.has_value());
  EXPECT_EQ(*finding.device_total_bytes, uint64_t(1 * kGiB));
  ASSERT_TRUE(finding.seconds_until_full.has_value());
  EXPECT_NEAR(*finding.seconds_until_full,
              static_cast<double>(kGiB - static_cast<int64_t>(finding.end_low_bytes)) / finding.rate_bytes_per_s, 1e-9);
  // Only the leaking stack grew between the two low-watermark moments; the weights and the temporary did not.
  ASSERT_EQ(finding.stacks.size(), 1u);
  EXPECT_EQ(finding.growing_stack_groups, 1u);
  EXPECT_EQ(finding.stacks[0].stack.id, stacks.leak);
  ASSERT_FALSE(finding.stacks[0].stack.frames.empty());
  EXPECT_EQ(finding.stacks[0].stack.frames[0].function, "cache_result");
  EXPECT_EQ(finding.stacks[0].end_bytes - finding.stacks[0].start_bytes,
            finding.end_low_bytes - finding.start_low_bytes);
  // The low watermarks behind it: one per window, the warm-up first.
  ASSERT_EQ(growth.devices.size(), 1u);
  EXPECT_EQ(growth.devices[0].low_watermarks.size(), 20u);
  EXPECT_EQ(growth.devices[0].low_watermarks[0], 0u);  // before the weights
  EXPECT_TRUE(growth.devices[0].growing);
}

TEST(GrowthTest, FreeingEverythingAtShutdownDoesNotHideTheGrowth) {
  TraceBuilder builder;
  LoopTrace stacks = build_loop(builder, 100, 2 * kMiB, /*free_at_shutdown=*/true);
  Report report = analyze(builder);
  EXPECT_EQ(report.totals.leaked_bytes, uint64_t(64 * kMiB));  // only the weights
  ASSERT_EQ(report.growth.findings.size(), 1u);
  EXPECT_EQ(report.growth.findings[0].stacks[0].stack.id, stacks.leak);
  EXPECT_FALSE(report.growth.findings[0].device_total_bytes.has_value());  // no failure, no meta: no projection
  EXPECT_FALSE(report.growth.findings[0].seconds_until_full.has_value());
}

TEST(GrowthTest, ASteadyStateHasNoFinding) {
  TraceBuilder builder;
  build_loop(builder, 100, 0);
  Report report = analyze(builder);
  ASSERT_TRUE(report.growth.analyzed) << report.growth.reason;
  EXPECT_TRUE(report.growth.findings.empty());
  ASSERT_EQ(report.growth.devices.size(), 1u);
  EXPECT_FALSE(report.growth.devices[0].growing);
  EXPECT_EQ(report.growth.devices[0].rising_steps, 0u);
}

TEST(GrowthTest, TooFewEventsAreNotAnalyzedAndSaySo) {
  TraceBuilder builder;
  build_loop(builder, 10, 2 * kMiB);  // 1 + 10 * 3 = 31 changes, 30 up to the last allocation
  Report report = analyze(builder);
  EXPECT_FALSE(report.growth.analyzed);
  EXPECT_NE(report.growth.reason.find("too few"), std::string::npos) << report.growth.reason;
  EXPECT_NE(report.growth.reason.find(" 30 "), std::string::npos) << report.growth.reason;
  EXPECT_TRUE(report.growth.findings.empty());
}

TEST(GrowthTest, FewerEventsGiveFewerWindows) {
  TraceBuilder builder;
  build_loop(builder, 20, 2 * kMiB);  // 61 changes: 6 windows of 10
  Report report = analyze(builder);
  ASSERT_TRUE(report.growth.analyzed) << report.growth.reason;
  EXPECT_EQ(report.growth.windows, 6u);
  EXPECT_EQ(report.growth.findings.size(), 1u);
}

TEST(GrowthTest, AnEmptyTraceIsNotAnalyzed) {
  TraceBuilder builder;
  Report report = analyze(builder);
  EXPECT_FALSE(report.growth.analyzed);
  EXPECT_EQ(report.growth.reason, "nothing was allocated");
}

TEST(GrowthTest, MetaDeviceTotalGivesTheProjectionWithoutAFailure) {
  TraceBuilder builder;
  build_loop(builder, 100, 2 * kMiB);
  builder.meta("device_total_bytes", std::to_string(4 * kGiB));
  Report report = analyze(builder);
  ASSERT_EQ(report.growth.findings.size(), 1u);
  EXPECT_EQ(report.growth.findings[0].device_total_bytes, uint64_t(4 * kGiB));
  EXPECT_TRUE(report.growth.findings[0].seconds_until_full.has_value());
}

TEST(WindowLowsTest, EachWindowKeepsItsLowestLevelAndWhenItWasReached) {
  ChangeLog log;
  const uint32_t slot = log.slot_for(1, 0, schema::MemoryKind::Device);
  // Windows of 10 ns over [0, 29].
  log.append(0, 100, slot, true);  // window 0: 0 carried in, then 100
  log.append(12, 50, slot, true);  // window 1: 100 carried in, 150, 110
  log.append(15, 40, slot, false);
  log.append(29, 5, slot, true);  // window 2: 110 carried in, 115
  auto lows = window_lows(log, 0, 29, 3);
  ASSERT_EQ(lows.size(), 1u);
  const WindowLows& device = lows.at(0);
  EXPECT_EQ(device.lows, (std::vector<uint64_t>{0, 100, 110}));
  EXPECT_EQ(device.positions, (std::vector<uint64_t>{0, 1, 3}));  // changes applied at that moment
  EXPECT_EQ(device.times, (std::vector<int64_t>{0, 10, 20}));     // carried-in levels: the window's start
}

}  // namespace
}  // namespace gmt::analysis
