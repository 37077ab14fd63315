// diff_reports on two handmade traces of "the same program" at different load addresses: stacks match by
// function, file and line (or module + offset), never by pc or id; statuses, bytes and regressions exact.
#include <gtest/gtest.h>

#include <memory>

#include "analysis/model/analyze.h"
#include "analysis/model/diff.h"
#include "analysis/model/report.h"
#include "trace_builder.h"

namespace gmt::analysis {
namespace {

using test_support::TraceBuilder;

// One run: the app loaded at `base`; `shift` moves the symbolized pcs inside it (another build), while the
// unsymbolized frame keeps its offset 0x5000 (the same code in a library that was not rebuilt).
struct Run {
  TraceBuilder builder;
  int64_t next_address = 0x100000;
  int64_t app = 0;
  uint64_t base = 0;
  uint64_t shift = 0;
  Run(uint64_t load_base, uint64_t pc_shift) : base(load_base), shift(pc_shift) {
    app = builder.module("/build/app", base, 0x100000);
    builder.symbol(base + 0x2000 + shift, "main", "main.cpp", 9, app);
  }
  int64_t symbolized(const std::string& function, int64_t line) {
    const uint64_t pc = base + 0x1000 + shift + static_cast<uint64_t>(line) * 0x10;
    builder.symbol(pc, function, "app.cpp", line, app);
    const uint64_t main_pc = base + 0x2000 + shift;
    return builder.stack({pc, main_pc});
  }
  int64_t unsymbolized() { return builder.stack({base + 0x5000}); }
  void leak(int64_t stack, int64_t bytes) {
    builder.alloc(10, next_address, bytes, stack);
    next_address += 0x100000;
  }
  Report report() {
    TraceFile file = builder.open();
    return analyze_trace(file);
  }
};

const LeakDiff& find(const TraceDiff& diff, DiffStatus status) {
  for (const LeakDiff& leak : diff.leaks) {
    if (leak.status == status) return leak;
  }
  throw std::runtime_error(std::string("no leak with status ") + to_string(status));
}

struct TwoRuns {
  Report base_report;
  Report new_report;
  TwoRuns() {
    Run base(0x400000, 0);
    base.leak(base.symbolized("load_weights", 10), 1000);   // same
    base.leak(base.symbolized("make_workspace", 20), 300);  // grows to 400
    base.leak(base.unsymbolized(), 500);                    // shrinks to 200
    base.leak(base.symbolized("stage_inputs", 30), 50);     // gone
    base_report = base.report();

    Run next(0x7f0000000000, 0x40);  // another address and another build: every pc differs
    next.leak(next.symbolized("load_weights", 10), 1000);
    int64_t workspace = next.symbolized("make_workspace", 20);
    next.leak(workspace, 200);
    next.leak(workspace, 200);
    next.leak(next.unsymbolized(), 200);
    next.leak(next.symbolized("cache_results", 40), 70);  // new
    new_report = next.report();
  }
};

TEST(DiffTest, StacksMatchBySourceLineAndModuleOffsetAcrossLoadAddresses) {
  TwoRuns runs;
  TraceDiff diff = diff_reports(runs.base_report, runs.new_report, DiffOptions{});
  ASSERT_EQ(diff.leaks.size(), 5u);

  const LeakDiff& same = find(diff, DiffStatus::Same);
  EXPECT_EQ(same.base_bytes, 1000u);
  EXPECT_EQ(same.new_bytes, 1000u);
  EXPECT_FALSE(same.regression);
  EXPECT_EQ(same.stack.frames.at(0).function, std::optional<std::string>("load_weights"));

  const LeakDiff& grew = find(diff, DiffStatus::Grew);
  EXPECT_EQ(grew.base_bytes, 300u);
  EXPECT_EQ(grew.new_bytes, 400u);
  EXPECT_EQ(grew.new_count, 2u);
  EXPECT_EQ(grew.delta(), 100);
  EXPECT_TRUE(grew.regression);

  const LeakDiff& shrank = find(diff, DiffStatus::Shrank);  // matched by libapp + 0x5000
  EXPECT_EQ(shrank.base_bytes, 500u);
  EXPECT_EQ(shrank.new_bytes, 200u);
  EXPECT_EQ(shrank.delta(), -300);
  EXPECT_FALSE(shrank.regression);
  EXPECT_EQ(shrank.stack.frames.at(0).module_offset, std::optional<uint64_t>(0x5000));

  const LeakDiff& gone = find(diff, DiffStatus::Gone);
  EXPECT_EQ(gone.base_bytes, 50u);
  EXPECT_EQ(gone.new_bytes, 0u);
  EXPECT_FALSE(gone.regression);

  const LeakDiff& added = find(diff, DiffStatus::New);
  EXPECT_EQ(added.new_bytes, 70u);
  EXPECT_TRUE(added.regression);

  // Leaked 1850 -> 1670 B; with every allocation live to the end, the peaks are the same numbers: smaller,
  // so neither is a regression although two stacks are.
  EXPECT_EQ(diff.leaked.base_bytes, 1850u);
  EXPECT_EQ(diff.leaked.new_bytes, 1670u);
  EXPECT_FALSE(diff.leaked.regression);
  EXPECT_EQ(diff.total_peak.delta(), -180);
  ASSERT_EQ(diff.device_peaks.size(), 1u);
  EXPECT_EQ(diff.device_peaks[0].device, std::optional<int64_t>(0));
  EXPECT_FALSE(diff.device_peaks[0].regression);
  // The new leak and the grown one; regressions come first in the list.
  ASSERT_EQ(diff.regressions.size(), 2u);
  EXPECT_EQ(diff.regressions[0], "leak grew by +100 B (300 B -> 400 B) at make_workspace app.cpp:20 [app]");
  EXPECT_EQ(diff.regressions[1], "new leak: 70 B in 1 allocation at cache_results app.cpp:40 [app]");
  EXPECT_TRUE(diff.leaks[0].regression);
  EXPECT_TRUE(diff.leaks[1].regression);
  EXPECT_FALSE(diff.leaks[2].regression);
}

TEST(DiffTest, ThresholdsInBytesAndPercent) {
  TwoRuns runs;
  DiffOptions bytes;
  bytes.threshold_bytes = 100;  // the workspace grew by exactly 100: not beyond
  TraceDiff by_bytes = diff_reports(runs.base_report, runs.new_report, bytes);
  EXPECT_FALSE(find(by_bytes, DiffStatus::Grew).regression);
  EXPECT_TRUE(find(by_bytes, DiffStatus::New).regression);  // a new leak stack always is one
  EXPECT_FALSE(by_bytes.total_peak.regression);
  EXPECT_FALSE(by_bytes.leaked.regression);
  EXPECT_EQ(by_bytes.regressions.size(), 1u);

  DiffOptions percent;
  percent.threshold_percent = 30;  // 30% of 300 = 90 < 100: the workspace regressed
  TraceDiff by_percent = diff_reports(runs.base_report, runs.new_report, percent);
  EXPECT_TRUE(find(by_percent, DiffStatus::Grew).regression);
  EXPECT_FALSE(by_percent.total_peak.regression);
  EXPECT_EQ(by_percent.regressions.size(), 2u);
}

TEST(DiffTest, TheSameTraceHasNoRegression) {
  TwoRuns runs;
  TraceDiff diff = diff_reports(runs.new_report, runs.new_report, DiffOptions{});
  EXPECT_TRUE(diff.regressions.empty());
  for (const LeakDiff& leak : diff.leaks) EXPECT_EQ(leak.status, DiffStatus::Same);
  const std::string text = render_diff_text(diff);
  EXPECT_NE(text.find("No regression."), std::string::npos) << text;
  const std::string json = render_diff_json(diff);
  EXPECT_NE(json.find("\"regression\": false"), std::string::npos);
}

TEST(DiffTest, KeysUseSymbolsThenModuleOffset) {
  Stack stack;
  stack.id = 3;
  Frame symbolized;
  symbolized.pc = 0x401000;
  symbolized.function = "f";
  symbolized.file = "a.cpp";
  symbolized.line = 12;
  Frame in_module;
  in_module.pc = 0x7f0000001234;
  in_module.module = "/usr/lib/libx.so";
  in_module.module_offset = 0x1234;
  Frame unknown;
  unknown.pc = 0x99;
  stack.frames = {symbolized, in_module, unknown};
  EXPECT_EQ(diff_stack_key(stack), "f:f\x1f"
                                   "a.cpp\x1f"
                                   "12\x1em:libx.so\x1f"
                                   "0x1234\x1e?\x1e");
  EXPECT_EQ(diff_stack_key(Stack{}), "(no frames)");
}

}  // namespace
}  // namespace gmt::analysis
