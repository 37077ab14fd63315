// The renderers' parts about memory over time: the JSON carries the model's numbers under the documented
// names; the text report has the sparkline, growth, fragmentation and OOM lines.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/model/analyze.h"
#include "analysis/model/report.h"
#include "analysis/render/render.h"
#include "trace_builder.h"

namespace gmt::analysis {
namespace {

using test_support::TraceBuilder;

#define EXPECT_CONTAINS(text, needle) EXPECT_PRED_FORMAT2(::testing::IsSubstring, needle, text)

constexpr int64_t kMiB = 1024 * 1024;
constexpr int64_t kMs = 1'000'000;

// A 100-step loop leaking 1 MiB per step on device 0 from cache_result, with a fragmentation OOM at the
// end: 4 MiB requested, 512 MiB free, 1 GiB in total. A step takes step_ns (1 ms: the loop runs 0.1 s).
Report growing_report(TraceBuilder& builder, int64_t step_ns = kMs) {
  int64_t module = builder.module("/app", 0x1000, 0x10000);
  int64_t leak = builder.stack({0x1300});
  int64_t temporary = builder.stack({0x1200});
  builder.symbol(0x1300, "cache_result", "loop.cu", 30, module);
  builder.symbol(0x1200, "make_temporary", "loop.cu", 20, module);
  builder.begin();
  for (int i = 0; i < 100; ++i) {
    builder.alloc(i * step_ns, 0x100000000, 3 * kMiB, temporary);
    builder.alloc(i * step_ns + 100, 0x200000000 + i * 2 * kMiB, kMiB, leak);  // 1 MiB gaps between the leaks
    builder.free(i * step_ns + 200, 0x100000000);
  }
  builder.commit();
  builder.alloc_failed(101 * step_ns, 4 * kMiB, 2, leak, 512 * kMiB, 1024 * kMiB);
  TraceFile trace = builder.open();
  return analyze_trace(trace);
}

TEST(RenderOverTimeTest, JsonCarriesEveryFigure) {
  TraceBuilder builder;
  Report report = growing_report(builder);
  nlohmann::json json = nlohmann::json::parse(render_json(report, RenderOptions{}));

  const auto& timeline = json["timeline"];
  EXPECT_EQ(timeline["bucket_ns"], report.timeline.bucket_ns);
  EXPECT_EQ(timeline["bucket_count"], 300);  // one per change of live bytes
  ASSERT_EQ(timeline["total"].size(), 300u);
  EXPECT_EQ(timeline["total"][299]["max_bytes"], report.timeline.total[299].max_bytes);
  ASSERT_EQ(timeline["series"].size(), 1u);
  EXPECT_EQ(timeline["series"][0]["device"], 0);
  EXPECT_EQ(timeline["series"][0]["memory_kind"], "device");
  EXPECT_EQ(timeline["series"][0]["buckets"].size(), 300u);

  const auto& peaks = json["peak_stacks"];
  ASSERT_EQ(peaks.size(), 1u);
  EXPECT_EQ(peaks[0]["device"], 0);
  EXPECT_EQ(peaks[0]["bytes"], 103 * kMiB);  // 100 leaks and the last temporary
  EXPECT_EQ(peaks[0]["stacks"][0]["bytes"], 100 * kMiB);
  EXPECT_EQ(peaks[0]["stacks"][0]["count"], 100);
  EXPECT_EQ(peaks[0]["stacks"][0]["stack"][0]["function"], "cache_result");

  const auto& growth = json["growth"];
  EXPECT_EQ(growth["analyzed"], true);
  EXPECT_TRUE(growth["reason"].is_null());
  EXPECT_EQ(growth["windows"], 20);
  ASSERT_EQ(growth["devices"].size(), 1u);
  EXPECT_EQ(growth["devices"][0]["low_watermarks"].size(), 20u);
  EXPECT_EQ(growth["devices"][0]["growing"], true);
  ASSERT_EQ(growth["findings"].size(), 1u);
  const auto& finding = growth["findings"][0];
  EXPECT_EQ(finding["device"], 0);
  EXPECT_GT(finding["rate_bytes_per_s"].get<double>(), 0.0);
  EXPECT_EQ(finding["projection"]["device_total_bytes"], 1024 * kMiB);
  EXPECT_GT(finding["projection"]["seconds_until_full"].get<double>(), 0.0);
  ASSERT_EQ(finding["stacks"].size(), 1u);
  EXPECT_EQ(finding["stacks"][0]["growth_bytes"],
            finding["stacks"][0]["end_bytes"].get<uint64_t>() - finding["stacks"][0]["start_bytes"].get<uint64_t>());
  EXPECT_EQ(finding["stacks"][0]["stack"][0]["function"], "cache_result");
  EXPECT_EQ(finding["stacks"][0]["stack"][0]["line"], 30);

  const auto& fragmentation = json["fragmentation"];
  ASSERT_EQ(fragmentation.size(), 1u);
  EXPECT_EQ(fragmentation[0]["at_end"]["allocations"], 100);
  EXPECT_EQ(fragmentation[0]["at_end"]["free_bytes"], 99 * kMiB);
  EXPECT_EQ(fragmentation[0]["at_end"]["largest_gap_bytes"], kMiB);
  EXPECT_NEAR(fragmentation[0]["at_end"]["ratio"].get<double>(), 1.0 - 1.0 / 99, 1e-12);
  EXPECT_FALSE(fragmentation[0]["at_peak"].is_null());

  const auto& failure = json["failures"][0];
  EXPECT_EQ(failure["label"], "fragmentation");
  EXPECT_EQ(failure["largest_free_gap"], kMiB);
  EXPECT_EQ(failure["fragmentation"]["free_bytes"], 99 * kMiB);
  ASSERT_EQ(failure["top_stacks"].size(), 1u);
  EXPECT_EQ(failure["top_stacks"][0]["bytes"], 100 * kMiB);

  // TraceBuilder makes traces with the current schema; whether it has the pool_usage table decides.
  EXPECT_TRUE(json["pools"].is_null() || json["pools"].is_array());
}

TEST(RenderOverTimeTest, GrowthOverAShortSpanIsToldInBytesWithoutARateOrProjection) {
  TraceBuilder builder;
  const std::string text = render_text(growing_report(builder), RenderOptions{});  // 0.1 s of growth
  EXPECT_CONTAINS(text, "device 0 grew steadily by ");
  EXPECT_FALSE(text.find("/s:") != std::string::npos) << text;
  EXPECT_FALSE(text.find("at this rate") != std::string::npos) << text;
}

TEST(RenderOverTimeTest, TextShowsSparklineGrowthAndLabelsButNoAddressGaps) {
  TraceBuilder builder;
  Report report = growing_report(builder, 200 * kMs);  // 20 s of growth: a rate per second means something
  const std::string text = render_text(report, RenderOptions{});
  EXPECT_CONTAINS(text, "  over time  ");
  EXPECT_CONTAINS(text, "█");
  EXPECT_CONTAINS(text, "device 0 peaked at 103.00 MiB");
  EXPECT_CONTAINS(text, "\nGrowth (low watermark of live memory over time)\n");
  EXPECT_CONTAINS(text, "device 0 grows steadily at ");
  EXPECT_CONTAINS(text, "at this rate device 0 is full in ");
  EXPECT_CONTAINS(text, "at cache_result loop.cu:30");
  // Address gaps between driver allocations say nothing of whether a cudaMalloc fits: JSON only.
  EXPECT_FALSE(text.find("Fragmentation of device memory") != std::string::npos) << text;
  EXPECT_FALSE(text.find("free in gaps between") != std::string::npos) << text;
  EXPECT_CONTAINS(text, "label: fragmentation");
  EXPECT_FALSE(text.find("largest free gap") != std::string::npos) << text;
}

TEST(RenderOverTimeTest, NotAnalyzedGrowthSaysWhy) {
  TraceBuilder builder;
  builder.alloc(10, 0x1000, 64);
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  const std::string text = render_text(report, RenderOptions{});
  EXPECT_CONTAINS(text, "not analyzed: too few allocations and frees");
  nlohmann::json json = nlohmann::json::parse(render_json(report, RenderOptions{}));
  EXPECT_EQ(json["growth"]["analyzed"], false);
  EXPECT_NE(json["growth"]["reason"].get<std::string>().find("too few"), std::string::npos);
  EXPECT_TRUE(json["growth"]["findings"].empty());
}

}  // namespace
}  // namespace gmt::analysis
