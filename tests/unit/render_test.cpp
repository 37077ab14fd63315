// The renderers: JSON carries exactly the model's numbers; the text report has the lines a user reads.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/format.h"
#include "analysis/model/analyze.h"
#include "analysis/model/report.h"
#include "analysis/render/render.h"
#include "trace_builder.h"

namespace gmt::analysis {
namespace {

using schema::Api;
using schema::MemoryKind;
using test_support::TraceBuilder;

// gtest's own substring predicates: the test binary links gtest only, not gmock.
#define EXPECT_CONTAINS(text, needle) EXPECT_PRED_FORMAT2(::testing::IsSubstring, needle, text)
#define EXPECT_LACKS(text, needle) EXPECT_PRED_FORMAT2(::testing::IsNotSubstring, needle, text)

constexpr int64_t kMiB = 1024 * 1024;
constexpr int64_t kGiB = 1024 * kMiB;
const char* const kOddName = R"(operator<< <float>(a&b, "q") const)";

// Three leak groups (4 MiB in 1, 2 MiB in 2, 1 MiB in 1 = 7 MiB in 4), one freed allocation, one failure.
void build_sample(TraceBuilder& builder) {
  int64_t app = builder.module("/opt/app/bin/app", 0x400000, 0x10000);
  builder.module("/usr/lib/libfoo.so", 0x7f0000000000, 0x100000);
  builder.symbol(0x401234, "leak_a(int)", "src/a.cu", 12, app);
  builder.symbol(0x401300, "main", "src/main.cu", 30, app);
  builder.symbol(0x402000, kOddName, "src/odd.h", 7, app);
  int64_t a = builder.stack({0x401234, 0x401300});
  int64_t b = builder.stack({0x402000, 0x7f0000001000});
  int64_t c = builder.stack({0x401300});
  builder.alloc(1000, 0x1000, 4 * kMiB, a);
  builder.alloc(2000, 0x2000, 1 * kMiB, b, Api::cudaMallocManaged, MemoryKind::Managed);
  builder.alloc(3000, 0x3000, 1 * kMiB, b, Api::cudaMallocManaged, MemoryKind::Managed);
  builder.alloc(4000, 0x4000, 8 * kMiB, c);
  builder.free(5000, 0x4000);
  builder.alloc(6000, 0x5000, 1 * kMiB, c);
  builder.alloc_failed(7000, 16 * kGiB, 2, a, 1 * kGiB, 80 * kGiB);
}

Report sample_report(TraceBuilder& builder) {
  build_sample(builder);
  TraceFile trace = builder.open();
  return analyze_trace(trace);
}

TEST(RenderJsonTest, FieldsEqualTheModel) {
  TraceBuilder builder;
  Report report = sample_report(builder);
  nlohmann::json json = nlohmann::json::parse(render_json(report, RenderOptions{}));

  const auto& totals = json["totals"];
  EXPECT_EQ(totals["allocations"], report.totals.allocations);
  EXPECT_EQ(totals["frees"], report.totals.frees);
  EXPECT_EQ(totals["failed_allocations"], 1);
  EXPECT_EQ(totals["leaked_bytes"], 7 * kMiB);
  EXPECT_EQ(totals["leaked_allocations"], 4);
  EXPECT_EQ(totals["peak_bytes"], report.totals.peak_bytes);
  EXPECT_EQ(totals["peak_bytes"], 14 * kMiB);  // 4 + 1 + 1 + 8
  EXPECT_EQ(totals["peak_time_ns"], 4000);
  EXPECT_EQ(totals["unmatched_frees"], 0);

  const auto& trace = json["trace"];
  EXPECT_EQ(trace["path"], builder.path());
  EXPECT_EQ(trace["pid"], 4242);
  EXPECT_EQ(trace["command_line"], "./app --iterations 3");
  EXPECT_EQ(trace["complete"], true);
  EXPECT_EQ(trace["simulated"], false);
  EXPECT_EQ(trace["symbolized"], true);
  EXPECT_EQ(trace["schema_version"], schema::kSchemaVersion);
  EXPECT_EQ(trace["duration_ns"], report.trace.duration_ns);

  EXPECT_EQ(json["peak_by_kind"]["device"], 12 * kMiB);
  EXPECT_EQ(json["peak_by_kind"]["managed"], 2 * kMiB);
  EXPECT_EQ(json["peak_by_kind"]["host_pinned"], 0);

  const auto& leaks = json["leaks"];
  ASSERT_EQ(leaks.size(), report.leaks.size());
  for (size_t i = 0; i < leaks.size(); ++i) {
    EXPECT_EQ(leaks[i]["bytes"], report.leaks[i].bytes);
    EXPECT_EQ(leaks[i]["count"], report.leaks[i].count);
    EXPECT_EQ(leaks[i]["stack_id"], report.leaks[i].stack.id);
    EXPECT_EQ(leaks[i]["stack"].size(), report.leaks[i].stack.frames.size());
  }
  EXPECT_EQ(leaks[0]["memory_kinds"], nlohmann::json::array({"device"}));
  EXPECT_EQ(leaks[0]["apis"], nlohmann::json::array({"cudaMalloc"}));
  EXPECT_EQ(leaks[1]["memory_kinds"], nlohmann::json::array({"managed"}));
  EXPECT_EQ(leaks[1]["apis"], nlohmann::json::array({"cudaMallocManaged"}));

  const auto& top = leaks[0]["stack"][0];
  EXPECT_EQ(top["function"], "leak_a(int)");
  EXPECT_EQ(top["file"], "src/a.cu");
  EXPECT_EQ(top["line"], 12);
  EXPECT_EQ(top["module"], "/opt/app/bin/app");
  EXPECT_EQ(top["pc"], "0x401234");
  const auto& unknown = leaks[1]["stack"][1];
  EXPECT_TRUE(unknown["function"].is_null());
  EXPECT_TRUE(unknown["file"].is_null());
  EXPECT_TRUE(unknown["line"].is_null());
  EXPECT_EQ(unknown["module"], "/usr/lib/libfoo.so");
  EXPECT_EQ(unknown["pc"], "0x7f0000001000");

  ASSERT_EQ(json["failures"].size(), 1u);
  const auto& failure = json["failures"][0];
  EXPECT_EQ(failure["requested_bytes"], 16 * kGiB);
  EXPECT_EQ(failure["error"], 2);
  EXPECT_EQ(failure["error_name"], "cudaErrorMemoryAllocation");
  EXPECT_EQ(failure["device_free"], 1 * kGiB);
  EXPECT_EQ(failure["device_total"], 80 * kGiB);
  EXPECT_EQ(failure["time_ns"], 7000);
  EXPECT_EQ(failure["api"], "cudaMalloc");
  EXPECT_EQ(failure["stack"].size(), 2u);
}

TEST(RenderJsonTest, SpecialCharactersInNamesSurvive) {
  TraceBuilder builder;
  Report report = sample_report(builder);
  std::string text = render_json(report, RenderOptions{});
  nlohmann::json json = nlohmann::json::parse(text);
  EXPECT_EQ(json["leaks"][1]["stack"][0]["function"], kOddName);
}

TEST(RenderJsonTest, InvalidUtf8DoesNotThrow) {
  Report report;
  LeakGroup group;
  group.bytes = 1;
  group.count = 1;
  group.stack.id = 1;
  Frame frame;
  frame.pc = 1;
  frame.function = std::string("bad\xff\xfe name");
  group.stack.frames.push_back(frame);
  report.leaks.push_back(group);
  std::string text;
  EXPECT_NO_THROW(text = render_json(report, RenderOptions{}));
  nlohmann::json parsed;
  EXPECT_NO_THROW(parsed = nlohmann::json::parse(text));
  EXPECT_EQ(parsed["leaks"].size(), 1u);
}

TEST(RenderJsonTest, TopCutsLeakGroups) {
  TraceBuilder builder;
  Report report = sample_report(builder);
  nlohmann::json json = nlohmann::json::parse(render_json(report, RenderOptions{.top = 1}));
  EXPECT_EQ(json["leaks"].size(), 1u);
  EXPECT_EQ(json["leak_groups"]["total"], 3);
  EXPECT_EQ(json["leak_groups"]["shown"], 1);
  EXPECT_EQ(json["leak_groups"]["not_shown"], 2);
  EXPECT_EQ(json["totals"]["leaked_bytes"], 7 * kMiB);  // totals never cut
}

TEST(RenderTextTest, ContainsTheExpectedLines) {
  TraceBuilder builder;
  Report report = sample_report(builder);
  std::string text = render_text(report, RenderOptions{.top = 2});
  EXPECT_CONTAINS(text, "gpumemtrace report for ./app --iterations 3\n");
  EXPECT_CONTAINS(text, "  pid        4242\n");
  EXPECT_CONTAINS(text, "  duration   5.000 s\n");
  EXPECT_CONTAINS(text, "  leaked              7.00 MiB (7340032 B) in 4 allocations\n");
  EXPECT_CONTAINS(text, "  failed allocations  1\n");
  EXPECT_CONTAINS(text, "Peak live memory: 14.00 MiB (14680064 B) at 4.0 us\n");
  EXPECT_CONTAINS(text, "Leaks by call stack (3 groups, largest first)\n");
  EXPECT_CONTAINS(text, "\n#1 4.00 MiB in 1 allocation (cudaMalloc, device) at 1.0 us\n"
                        "    at leak_a(int) src/a.cu:12 [app]\n"
                        "    at main src/main.cu:30 [app]\n");
  EXPECT_CONTAINS(text, "\n#2 2.00 MiB in 2 allocations (cudaMallocManaged, managed) from 2.0 us to 3.0 us\n");
  EXPECT_CONTAINS(text, std::string("    at ") + kOddName + " src/odd.h:7 [app]\n");
  EXPECT_CONTAINS(text, "    at libfoo.so+0x1000\n");  // no symbol: module+offset, as addr2line takes it
  EXPECT_LACKS(text, "#3 ");
  EXPECT_CONTAINS(text, "Failed allocations (1)\n");
  EXPECT_CONTAINS(text, "cudaMalloc of 16.00 GiB (17179869184 B) on device 0 failed at 7.0 us: "
                        "cudaErrorMemoryAllocation (2)\n"
                        "    device free at that moment: 1.00 GiB (1073741824 B) of 80.00 GiB\n");
  EXPECT_CONTAINS(text, "1 more leak group (1.00 MiB in 1 allocation) not shown: use --top 3 to see all.\n");
  EXPECT_LACKS(text, "warning:");
  EXPECT_LACKS(text, "No leaks");
}

TEST(RenderTextTest, CleanTraceSaysNoLeaks) {
  TraceBuilder builder;
  builder.alloc(10, 0x1000, 512);
  builder.free(20, 0x1000);
  TraceFile trace = builder.open();
  std::string text = render_text(analyze_trace(trace), RenderOptions{});
  EXPECT_CONTAINS(text, "No leaks: every allocation was freed.\n");
  EXPECT_CONTAINS(text, "Peak live memory: 512 B at 10 ns\n");
  EXPECT_LACKS(text, "Leaks by call stack");
  EXPECT_LACKS(text, "not shown");
  EXPECT_LACKS(text, "Failed allocations");
}

// "No leaks" is a verdict: only on a trace that holds the whole run, and never about a run that recorded nothing.
TEST(RenderTextTest, NoLeaksOnlyWhereTheTraceSupportsIt) {
  {
    TraceBuilder builder;
    builder.meta(schema::meta::kComplete, "0");
    builder.alloc(10, 0x1000, 512);
    builder.free(20, 0x1000);
    TraceFile trace = builder.open();
    std::string text = render_text(analyze_trace(trace), RenderOptions{});
    EXPECT_CONTAINS(text, "No leaks among the recorded allocations, but the trace is incomplete: no verdict.\n");
    EXPECT_LACKS(text, "every allocation was freed");
  }
  {
    TraceBuilder builder;
    builder.meta(schema::meta::kDroppedEvents, "3");
    builder.alloc(10, 0x1000, 512);
    builder.free(20, 0x1000);
    TraceFile trace = builder.open();
    EXPECT_CONTAINS(render_text(analyze_trace(trace), RenderOptions{}),
                    "No leaks among the recorded allocations, but events were lost: no verdict.\n");
  }
  {
    TraceBuilder builder;
    TraceFile trace = builder.open();
    std::string text = render_text(analyze_trace(trace), RenderOptions{});
    EXPECT_CONTAINS(text, "Recorded no allocations.\n");
    EXPECT_LACKS(text, "every allocation was freed");
  }
}

// The exit status `run` stores: one header line, and the JSON trace object's two keys.
TEST(RenderTextTest, ShowsHowTheAppEnded) {
  TraceBuilder builder;
  builder.meta(schema::meta::kAppExitSignal, "9");
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  EXPECT_CONTAINS(render_text(report, RenderOptions{}), "  app        killed by signal 9 (Killed)\n");
  EXPECT_EQ(report.trace.app_exit_signal, 9);
  EXPECT_FALSE(report.trace.app_exit_status.has_value());
}

TEST(RenderTextTest, WarnsAboutIncompleteUnsymbolizedSimulatedTraces) {
  TraceBuilder builder;
  builder.meta(schema::meta::kComplete, "0")
      .meta(schema::meta::kSimulated, "1")
      .meta(schema::meta::kSymbolized, "0")
      .meta(schema::meta::kDroppedEvents, "5");
  builder.alloc(10, 0x1000, 512, 99);  // stack 99 does not exist
  TraceFile trace = builder.open();
  std::string text = render_text(analyze_trace(trace), RenderOptions{});
  EXPECT_CONTAINS(text, "simulated CUDA runtime");
  EXPECT_CONTAINS(text, "warning: the trace is incomplete");
  EXPECT_CONTAINS(text, "warning: the trace is not symbolized");
  EXPECT_CONTAINS(text, "warning: 5 events were lost while recording");
  EXPECT_CONTAINS(text, "#1 512 B in 1 allocation (cudaMalloc, device) at 10 ns\n"
                        "    (call stack 99 is missing from the trace)\n");
}

TEST(RenderTextTest, MinBytesAndLongStacksAreSummarized) {
  TraceBuilder builder;
  std::vector<uint64_t> deep;
  for (uint64_t i = 0; i < 20; ++i) deep.push_back(0x500000 + i);
  int64_t big = builder.stack(deep);
  int64_t small = builder.stack({0x401000});
  builder.alloc(10, 0x1000, 1 * kMiB, big);
  builder.alloc(20, 0x2000, 100, small);
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace, AnalyzeOptions{.min_bytes = 4096});
  std::string text = render_text(report, RenderOptions{.top = 10, .max_frames = 3});
  EXPECT_CONTAINS(text, "    at ?? 0x500002\n    ... 17 more frames (--format json lists every frame)\n");
  EXPECT_CONTAINS(text, "1 leak group (100 B in total) below --min-bytes 4.00 KiB (4096 B) not shown.\n");
}

TEST(FormatTest, SizesAndDurations) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes_exact(512), "512 B");
  EXPECT_EQ(format_bytes_exact(7340032), "7.00 MiB (7340032 B)");
  EXPECT_EQ(format_bytes(UINT64_MAX), "16.00 EiB");
  EXPECT_EQ(format_duration(850), "850 ns");
  EXPECT_EQ(format_duration(12'300), "12.3 us");
  EXPECT_EQ(format_duration(4'560'000), "4.56 ms");
  EXPECT_EQ(format_duration(1'234'000'000), "1.234 s");
  EXPECT_EQ(format_duration(123'500'000'000), "2 min 03.5 s");
  EXPECT_EQ(format_duration(-1500), "-1.5 us");
  EXPECT_EQ(format_duration(INT64_MIN).substr(0, 1), "-");
  EXPECT_EQ(format_pc(0x7f00), "0x7f00");
  EXPECT_EQ(path_basename("/usr/lib/libfoo.so"), "libfoo.so");
  EXPECT_EQ(path_basename("app"), "app");
  EXPECT_EQ(cuda_error_name(2), "cudaErrorMemoryAllocation");
  EXPECT_EQ(cuda_error_name(12345), "error 12345");
}

}  // namespace
}  // namespace gmt::analysis
