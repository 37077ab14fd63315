// Memory by NVTX range, growth per repetition, range spans and the report's filters, on handmade traces
// with exact numbers (analysis/model/ranges.h, analysis/model/filters.h).
#include <gtest/gtest.h>

#include "analysis/model/analyze.h"
#include "analysis/model/ranges.h"
#include "analysis/model/report.h"
#include "analysis/render/render.h"
#include "trace_builder.h"

namespace gmt::analysis {
namespace {

using test_support::EventRow;
using test_support::TraceBuilder;

constexpr int64_t kMiB = 1 << 20;
constexpr int64_t kSecond = 1'000'000'000;

Report analyze(TraceBuilder& builder, const EventFilters& filters = {}) {
  TraceFile trace = builder.open();
  AnalyzeOptions options;
  options.filters = filters;
  return analyze_trace(trace, options);
}

const RangeStats& range_named(const Report& report, const std::string& name) {
  for (const RangeStats& range : report.ranges.by_name) {
    if (range.name == name && !range.none) return range;
  }
  throw std::runtime_error("no range named " + name);
}

const RangeStats& none_bucket(const Report& report) {
  EXPECT_FALSE(report.ranges.by_name.empty());
  EXPECT_TRUE(report.ranges.by_name.back().none);
  return report.ranges.by_name.back();
}

void alloc_on_thread(TraceBuilder& builder, int64_t time_ns, int64_t address, int64_t size, int64_t thread_id) {
  EventRow row;
  row.time_ns = time_ns;
  row.address = address;
  row.size = size;
  row.thread_id = thread_id;
  builder.event(row);
}

TEST(RangesTest, ExactNumbersPerRange) {
  TraceBuilder builder;
  builder.range("a", 0, 100);
  builder.range("b", 200, 300);
  builder.alloc(10, 0x1000, 100);
  builder.alloc(20, 0x2000, 200);
  builder.free(50, 0x1000);
  builder.alloc(210, 0x3000, 400);  // leaked
  builder.free(250, 0x2000);        // freed inside b, but made in a
  builder.alloc(500, 0x4000, 50);   // outside every range, leaked
  Report report = analyze(builder);

  ASSERT_TRUE(report.ranges.available);
  EXPECT_EQ(report.ranges.range_count, 2u);
  ASSERT_EQ(report.ranges.by_name.size(), 3u);
  const RangeStats& a = range_named(report, "a");
  EXPECT_EQ(a.repetitions, 1u);
  EXPECT_EQ(a.allocations, 2u);
  EXPECT_EQ(a.allocated_bytes, 300u);
  EXPECT_EQ(a.frees, 2u);
  EXPECT_EQ(a.freed_bytes, 300u);
  EXPECT_EQ(a.live_bytes, 0u);
  EXPECT_EQ(a.peak_live_bytes, 300u);
  const RangeStats& b = range_named(report, "b");
  EXPECT_EQ(b.allocations, 1u);
  EXPECT_EQ(b.allocated_bytes, 400u);
  EXPECT_EQ(b.frees, 0u);
  EXPECT_EQ(b.live_allocations, 1u);
  EXPECT_EQ(b.live_bytes, 400u);
  EXPECT_EQ(b.peak_live_bytes, 600u);  // a's 200 bytes were still live when b's 400 came
  const RangeStats& none = none_bucket(report);
  EXPECT_EQ(none.allocations, 1u);
  EXPECT_EQ(none.allocated_bytes, 50u);
  EXPECT_EQ(none.live_bytes, 50u);
  // Largest allocated first, `none` last.
  EXPECT_EQ(report.ranges.by_name[0].name, "b");
  EXPECT_EQ(report.ranges.by_name[1].name, "a");
}

TEST(RangesTest, NestedRangesAttributeToTheInnermostAndTheEndIsInclusive) {
  TraceBuilder builder;
  builder.range("outer", 0, 1000, 0);
  builder.range("inner", 100, 200, 1);
  builder.alloc(50, 0x1000, 1);
  builder.alloc(150, 0x2000, 10);
  builder.alloc(200, 0x3000, 100);  // at the inner range's end time: still inside it
  builder.alloc(300, 0x4000, 1000);
  Report report = analyze(builder);
  EXPECT_EQ(range_named(report, "outer").allocated_bytes, 1001u);
  EXPECT_EQ(range_named(report, "inner").allocated_bytes, 110u);
  EXPECT_EQ(none_bucket(report).allocations, 0u);
}

TEST(RangesTest, PushPopRangesBelongToTheirThread) {
  TraceBuilder builder;
  builder.range("t1", 0, 100, 0, 1000);
  builder.range("t2", 0, 100, 0, 2000);
  alloc_on_thread(builder, 50, 0x1000, 10, 1000);
  alloc_on_thread(builder, 50, 0x2000, 20, 2000);
  alloc_on_thread(builder, 60, 0x3000, 40, 3000);  // a thread with no range open
  Report report = analyze(builder);
  EXPECT_EQ(range_named(report, "t1").allocated_bytes, 10u);
  EXPECT_EQ(range_named(report, "t2").allocated_bytes, 20u);
  EXPECT_EQ(none_bucket(report).allocated_bytes, 40u);
}

TEST(RangesTest, StartEndRangesOfTheThreadComeFirstThenThoseOfTheProcess) {
  TraceBuilder builder;
  builder.range("phase", 0, 1000, -1, 2000);     // started by another thread: the process's phase
  builder.range("own push", 100, 200, 0, 1000);  // the allocating thread's own range wins
  builder.range("outer", 300, 600, 0, 1000);
  builder.range("own start", 400, 500, -1, 1000);  // started later on this thread than "outer"
  alloc_on_thread(builder, 50, 0x1000, 1, 1000);
  alloc_on_thread(builder, 150, 0x2000, 2, 1000);
  alloc_on_thread(builder, 350, 0x3000, 4, 1000);
  alloc_on_thread(builder, 450, 0x4000, 8, 1000);
  alloc_on_thread(builder, 2000, 0x5000, 16, 1000);
  Report report = analyze(builder);
  EXPECT_EQ(range_named(report, "phase").allocated_bytes, 1u);
  EXPECT_EQ(range_named(report, "own push").allocated_bytes, 2u);
  EXPECT_EQ(range_named(report, "outer").allocated_bytes, 4u);
  EXPECT_EQ(range_named(report, "own start").allocated_bytes, 8u);
  EXPECT_EQ(none_bucket(report).allocated_bytes, 16u);
}

TEST(RangesTest, UnclosedRangesStayOpenToTheEnd) {
  TraceBuilder builder;
  builder.range("left open", 100, std::nullopt, 0);
  builder.alloc(50, 0x1000, 1);
  builder.alloc(4 * kSecond, 0x2000, 2);
  Report report = analyze(builder);
  EXPECT_EQ(range_named(report, "left open").allocated_bytes, 2u);
  EXPECT_EQ(range_named(report, "left open").live_bytes, 2u);
  EXPECT_EQ(none_bucket(report).allocated_bytes, 1u);
  ASSERT_EQ(report.range_spans.size(), 1u);
  EXPECT_EQ(report.range_spans[0].start_ns, 100);
  EXPECT_FALSE(report.range_spans[0].end_ns.has_value());
}

TEST(RangesTest, DomainsKeepNamesApart) {
  TraceBuilder builder;
  builder.range("load", 0, 100, 0, 1000, "io");
  builder.range("load", 200, 300, 0, 1000);
  builder.alloc(50, 0x1000, 1);
  builder.alloc(250, 0x2000, 2);
  Report report = analyze(builder);
  ASSERT_EQ(report.ranges.by_name.size(), 3u);
  EXPECT_EQ(report.ranges.by_name[0].domain, "");
  EXPECT_EQ(report.ranges.by_name[0].allocated_bytes, 2u);
  EXPECT_EQ(report.ranges.by_name[1].domain, "io");
  EXPECT_EQ(report.ranges.by_name[1].allocated_bytes, 1u);
}

TEST(RangesTest, ATraceWithoutTheRangesTableStillAnalyzes) {
  test_support::TraceBuilderOptions options;
  options.user_version = 3;
  TraceBuilder builder(options);
  builder.exec("DROP TABLE ranges");
  builder.exec("DROP TABLE marks");
  builder.exec("DROP TABLE strings");
  builder.alloc(10, 0x1000, 100);
  builder.alloc(20, 0x2000, 50);
  builder.free(30, 0x1000);
  const std::string path = builder.path();
  Report report = analyze(builder);
  EXPECT_FALSE(report.ranges.available);
  EXPECT_TRUE(report.ranges.by_name.empty());
  EXPECT_TRUE(report.range_spans.empty());
  EXPECT_EQ(report.totals.leaked_bytes, 50u);
  EXPECT_EQ(report.totals.peak_bytes, 150u);
  EXPECT_NE(render_text(report).find("the trace has no ranges table: no memory by NVTX range"), std::string::npos);

  TraceFile trace = TraceFile::open(path);
  AnalyzeOptions filtered;
  filtered.filters.range = "step";
  Report by_range = analyze_trace(trace, filtered);
  EXPECT_EQ(by_range.totals.allocations, 0u);
  EXPECT_EQ(by_range.filters.nothing_matched, "--range 'step' matches nothing: the trace has no NVTX ranges");
}

// `step` repeated `steps` times; each leaks `leak` bytes (stack 1) and frees a temporary (stack 2).
void repeated_steps(TraceBuilder& builder, int steps, int64_t leak, bool double_buffer = false) {
  int64_t leak_stack = builder.stack({0x401000});
  int64_t temp_stack = builder.stack({0x402000});
  builder.begin();
  for (int s = 0; s < steps; ++s) {
    const int64_t t = 1000 + s * 1000;
    builder.range("step", t, t + 900);
    builder.alloc(t + 10, 0x100000 + s * 0x1000, 4 * kMiB + s, temp_stack);
    if (leak > 0) builder.alloc(t + 20, 0x900000 + s * 0x1000, leak, leak_stack);
    if (!double_buffer || s > 0)
      builder.free(t + 30, double_buffer ? 0x100000 + (s - 1) * 0x1000 : 0x100000 + s * 0x1000);
  }
  builder.commit();
}

TEST(RangeGrowthTest, ASlowLeakInARepeatedRangeIsFoundWithItsStack) {
  TraceBuilder builder;
  repeated_steps(builder, 6, 2 * kMiB);
  Report report = analyze(builder);
  ASSERT_EQ(report.ranges.growth.size(), 1u);
  const RangeGrowth& finding = report.ranges.growth[0];
  EXPECT_EQ(finding.name, "step");
  EXPECT_EQ(finding.iterations, 6u);
  EXPECT_DOUBLE_EQ(finding.bytes_per_iteration, 2.0 * kMiB);
  EXPECT_EQ(finding.live_bytes_at_end,
            (std::vector<uint64_t>{2 * kMiB, 4 * kMiB, 6 * kMiB, 8 * kMiB, 10 * kMiB, 12 * kMiB}));
  EXPECT_EQ(finding.rising_steps, 4u);
  EXPECT_EQ(finding.steps, 4u);
  ASSERT_EQ(finding.stacks.size(), 1u);  // the temporaries are freed in each step
  EXPECT_EQ(finding.stacks[0].stack.id, 1);
  EXPECT_EQ(finding.stacks[0].start_bytes, static_cast<uint64_t>(4 * kMiB));
  EXPECT_EQ(finding.stacks[0].end_bytes, static_cast<uint64_t>(12 * kMiB));
  EXPECT_EQ(finding.growing_stack_groups, 1u);
  const RangeStats& step = range_named(report, "step");
  EXPECT_EQ(step.repetitions, 6u);
  EXPECT_EQ(step.allocations, 12u);
  EXPECT_EQ(step.live_bytes, static_cast<uint64_t>(12 * kMiB));
}

TEST(RangeGrowthTest, ASteadyStateInARepeatedRangeHasNoFinding) {
  TraceBuilder builder;
  repeated_steps(builder, 10, 0, /*double_buffer=*/true);  // each step leaves its output to the next
  Report report = analyze(builder);
  EXPECT_TRUE(report.ranges.growth.empty());
  ASSERT_EQ(report.ranges.repeated.size(), 1u);
  const RangeGrowth& step = report.ranges.repeated[0];
  EXPECT_FALSE(step.growing);
  EXPECT_EQ(step.iterations, 10u);
  // One output live at each end (sizes differ by a byte per step): never a rise of a MiB.
  EXPECT_EQ(step.live_bytes_at_end[0], static_cast<uint64_t>(4 * kMiB));
  EXPECT_EQ(step.live_bytes_at_end[9], static_cast<uint64_t>(4 * kMiB + 9));
  EXPECT_LT(step.fitted_rise_bytes, static_cast<double>(step.threshold_bytes));
}

TEST(RangeGrowthTest, TheRule) {
  // A one-time rise (one step keeps something) is not steady growth.
  EXPECT_FALSE(evaluate_range_growth({0, 0, kMiB, kMiB}).growing);
  // Two repetitions are too few.
  EXPECT_FALSE(evaluate_range_growth({0, 10 * kMiB}).growing);
  // The warm-up is left out: a big first repetition and then a flat level do not grow.
  EXPECT_FALSE(evaluate_range_growth({100 * kMiB, 0, 0, 0, 0}).growing);
  // Three repetitions rising by a MiB each grow.
  EXPECT_TRUE(evaluate_range_growth({kMiB, 2 * kMiB, 3 * kMiB}).growing);
  // A rise below the threshold does not.
  EXPECT_FALSE(evaluate_range_growth({0, 1000, 2000, 3000, 4000}).growing);
}

TEST(RangeSpansTest, OutermostFirstAndCapped) {
  TraceBuilder builder;
  builder.begin();
  for (int i = 0; i < 2100; ++i) builder.range("inner", i * 10 + 1, i * 10 + 5, 1);
  builder.range("outer", 0, 30'000, 0);
  builder.range("phase", 5, std::nullopt, -1, 1000, "io");
  builder.commit();
  builder.alloc(2, 0x1000, 1);
  Report report = analyze(builder);
  ASSERT_EQ(report.range_spans.size(), kMaxRangeSpans);
  EXPECT_EQ(report.range_spans_left_out, 2102u - kMaxRangeSpans);
  EXPECT_EQ(report.range_spans[0].name, "phase");
  EXPECT_EQ(report.range_spans[0].domain, "io");
  EXPECT_EQ(report.range_spans[0].depth, -1);
  EXPECT_FALSE(report.range_spans[0].end_ns.has_value());
  EXPECT_EQ(report.range_spans[1].name, "outer");
  EXPECT_EQ(report.range_spans[1].end_ns, 30'000);
  EXPECT_EQ(report.range_spans[2].name, "inner");
  EXPECT_EQ(report.range_spans[2].start_ns, 1);
  EXPECT_EQ(report.range_spans[2].thread_id, 1000);
}

// Filters (filters.h).

TEST(FiltersTest, DeviceKeepsOneDeviceAndItsFrees) {
  TraceBuilder builder;
  builder.alloc(10, 0x1000, 100, 0, schema::Api::cudaMalloc, schema::MemoryKind::Device, 0);
  builder.alloc(20, 0x2000, 200, 0, schema::Api::cudaMalloc, schema::MemoryKind::Device, 1);
  builder.free(30, 0x1000);
  EventFilters filters;
  filters.device = 1;
  Report report = analyze(builder, filters);
  EXPECT_EQ(report.totals.allocations, 1u);
  EXPECT_EQ(report.totals.frees, 0u);
  EXPECT_EQ(report.totals.unmatched_frees, 0u);  // the free of device 0's allocation is left out with it
  EXPECT_EQ(report.totals.leaked_bytes, 200u);
  EXPECT_EQ(report.filters.allocations_matched, 1u);
  EXPECT_EQ(report.filters.allocations_seen, 2u);
  EXPECT_TRUE(report.filters.nothing_matched.empty());
  EXPECT_NE(render_text(report).find("filters    --device 1 (1 of 2 allocations analyzed)"), std::string::npos);
}

TEST(FiltersTest, TimeWindow) {
  TraceBuilder builder;
  builder.alloc(1 * kSecond, 0x1000, 1);
  builder.alloc(2 * kSecond, 0x2000, 2);
  builder.free(2 * kSecond + kSecond / 2, 0x2000);
  builder.free(3 * kSecond, 0x1000);
  builder.alloc(4 * kSecond, 0x3000, 4);
  const std::string path = builder.path();
  builder.close();
  TraceFile trace = TraceFile::open(path);
  AnalyzeOptions options;
  options.filters.since_ns = kSecond + kSecond / 2;
  options.filters.until_ns = 3 * kSecond + kSecond / 2;
  Report window = analyze_trace(trace, options);
  EXPECT_EQ(window.totals.allocated_bytes, 2u);  // only the allocation at 2 s
  EXPECT_EQ(window.totals.frees, 1u);
  EXPECT_EQ(window.totals.unmatched_frees, 0u);
  EXPECT_EQ(window.totals.leaked_bytes, 0u);

  options.filters.since_ns.reset();
  options.filters.until_ns = 2 * kSecond + kSecond / 5;  // both live then: frees after --until are left out
  Report until = analyze_trace(trace, options);
  EXPECT_EQ(until.totals.allocated_bytes, 3u);
  EXPECT_EQ(until.totals.frees, 0u);
  EXPECT_EQ(until.totals.leaked_bytes, 3u);
}

TEST(FiltersTest, MinSizeAndRange) {
  TraceBuilder builder;
  builder.range("step", 0, 1000, 0);
  builder.range("forward", 100, 200, 1);
  builder.alloc(50, 0x1000, 100);
  builder.alloc(150, 0x2000, 5000);  // inside "step" at depth 1
  builder.alloc(2000, 0x3000, 7000);
  const std::string path = builder.path();
  builder.close();
  TraceFile trace = TraceFile::open(path);
  AnalyzeOptions options;
  options.filters.min_size = 4096;
  EXPECT_EQ(analyze_trace(trace, options).totals.allocated_bytes, 12000u);
  options.filters.min_size.reset();
  options.filters.range = "step";
  Report in_step = analyze_trace(trace, options);
  EXPECT_EQ(in_step.totals.allocated_bytes, 5100u);
  EXPECT_EQ(range_named(in_step, "forward").allocated_bytes, 5000u);
  EXPECT_EQ(none_bucket(in_step).allocations, 0u);
}

TEST(FiltersTest, EachFilterThatMatchesNothingSaysSo) {
  TraceBuilder builder;
  builder.range("step", 0, 100, 0);
  builder.range("idle", 5000, 6000, 0);
  builder.alloc(10, 0x1000, 100, 0, schema::Api::cudaMalloc, schema::MemoryKind::Device, 0);
  builder.alloc(20, 0x2000, 300, 0, schema::Api::cudaMalloc, schema::MemoryKind::Device, 1);
  const std::string path = builder.path();
  builder.close();
  TraceFile trace = TraceFile::open(path);
  auto message = [&](const EventFilters& filters) {
    AnalyzeOptions options;
    options.filters = filters;
    Report report = analyze_trace(trace, options);
    EXPECT_EQ(report.totals.allocations, 0u);
    return report.filters.nothing_matched;
  };
  EventFilters pid;
  pid.pid = 1;
  EXPECT_EQ(message(pid), "--pid 1 matches nothing: the trace is of process 4242");
  EventFilters device;
  device.device = 7;
  EXPECT_EQ(message(device), "--device 7 matches nothing: the trace allocates on device(s) 0, 1 only");
  EventFilters window;
  window.since_ns = 2 * kSecond;
  EXPECT_EQ(message(window), "--since 2 matches nothing: no allocation in that time window (the trace lasts 5.000 s)");
  EventFilters size;
  size.min_size = 1000;
  EXPECT_EQ(message(size), "--min-size 1000 matches nothing: the largest allocation is 300 B");
  EventFilters unknown_range;
  unknown_range.range = "train";
  EXPECT_EQ(message(unknown_range), "--range 'train' matches nothing: the trace has no NVTX range of that name");
  EventFilters empty_range;
  empty_range.range = "idle";
  EXPECT_EQ(message(empty_range), "--range 'idle' matches nothing: no allocation was made inside a range of that name");
  EventFilters together;  // each alone matches, not both
  together.device = 0;
  together.min_size = 200;
  EXPECT_EQ(message(together),
            "--device 0 --min-size 200 match nothing together: each matches some allocations, but none matches all");
}

}  // namespace
}  // namespace gmt::analysis
