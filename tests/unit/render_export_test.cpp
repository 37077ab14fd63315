// The exported formats (render_export.h): the HTML page keeps hostile names inside its data, the folded
// stacks' exact lines, the Perfetto counters; and the text report's sparkline per device and kind.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/model/analyze.h"
#include "analysis/model/report.h"
#include "analysis/render/render.h"
#include "analysis/render/render_export.h"
#include "trace_builder.h"

namespace gmt::analysis {
namespace {

using test_support::TraceBuilder;

#define EXPECT_CONTAINS(text, needle) EXPECT_PRED_FORMAT2(::testing::IsSubstring, needle, text)

constexpr int64_t kMs = 1'000'000;
const std::string kHostile = "operator<<<script>alert(1)</script><!--";

size_t occurrences(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
  return count;
}

// Two leaks on device 0 (one from a hostile symbol, one from a frame with ';' in its name), a managed
// allocation, and a host allocation whose innermost frame has no symbol.
Report sample_report(TraceBuilder& builder) {
  int64_t module = builder.module("/opt/app/libmodel.so", 0x1000, 0x10000);
  builder.symbol(0x1100, kHostile, "a.cu", 1, module);
  builder.symbol(0x1200, "outer;main", "a.cu", 2, module);
  builder.symbol(0x1300, std::nullopt, std::nullopt, std::nullopt, module);
  int64_t hostile = builder.stack({0x1100, 0x1200});
  int64_t plain = builder.stack({0x1300, 0x1200});
  builder.exec("UPDATE meta SET value = '\"./app\" </script>' WHERE key = 'command_line'");
  builder.alloc(1 * kMs, 0x10000, 4096, hostile);
  builder.alloc(2 * kMs, 0x20000, 1024, plain);
  builder.event({.time_ns = 3 * kMs,
                 .memory_kind = static_cast<int64_t>(schema::MemoryKind::Managed),
                 .address = 0x30000,
                 .size = 512,
                 .stack_id = plain});
  builder.free(4 * kMs, 0x30000);
  TraceFile trace = builder.open();
  return analyze_trace(trace);
}

TEST(RenderExportTest, HtmlEmbedsHostileNamesAsData) {
  TraceBuilder builder;
  Report report = sample_report(builder);
  const std::string page = render_html(report);
  // The end tags of the page's own script elements: the report's data and code, the viewer's data (null here), d3
  // and the viewer's code.
  EXPECT_EQ(occurrences(page, "</script"), 5u);
  EXPECT_EQ(occurrences(page, "<!--"), 0u);
  EXPECT_EQ(occurrences(page, "<script>alert"), 0u);
  EXPECT_CONTAINS(page, "&quot;./app&quot; &lt;/script&gt;");  // the command line in the header and title
  const size_t start = page.find("id=\"gmt-report-data\">") + std::string("id=\"gmt-report-data\">").size();
  const auto data = nlohmann::json::parse(page.substr(start, page.find("</script>", start) - start));
  EXPECT_EQ(data["leaks"][0]["stack"][0]["function"], kHostile);
  EXPECT_EQ(data["totals"]["leaked_bytes"], 4096 + 1024);
}

TEST(RenderExportTest, HtmlViewerDataCarriesStacksAsData) {
  TraceBuilder builder;
  Report report = sample_report(builder);
  TraceFile trace = builder.open();
  const ViewerData viewer = collect_viewer_data(trace, {}, report, {});
  // The three allocations of the sample, by allocation time; the managed block freed at 4 ms.
  ASSERT_EQ(viewer.slices.shown.size(), 3u);
  EXPECT_EQ(viewer.slices.shown[2].size, 512u);
  EXPECT_EQ(viewer.slices.shown[2].free_ns, 4 * kMs);
  const std::string page = render_html(report, {}, &viewer);
  EXPECT_EQ(occurrences(page, "</script"), 5u);
  EXPECT_EQ(occurrences(page, "<script>alert"), 0u);
  const std::string tag = "id=\"gmt-viewer-data\">";
  const size_t start = page.find(tag) + tag.size();
  const auto data = nlohmann::json::parse(page.substr(start, page.find("</script>", start) - start));
  EXPECT_EQ(data["allocations"]["rows"].size(), 3u);
  bool hostile_frame = false;
  for (const auto& [id, stack] : data["stacks"].items()) {
    for (const auto& frame : stack["frames"]) hostile_frame = hostile_frame || frame == kHostile;
  }
  EXPECT_TRUE(hostile_frame);
}

TEST(RenderExportTest, FoldedLinesAreOutermostFirstAndEscaped) {
  TraceBuilder builder;
  Report report = sample_report(builder);
  EXPECT_EQ(render_folded(report, FoldedOf::Leaks), "outer%3Bmain;" + kHostile +
                                                        " 4096\n"
                                                        "outer%3Bmain;libmodel.so+0x300 1024\n");
  // At the peak (3 ms: both leaks and the managed block), under the device.
  EXPECT_EQ(render_folded(report, FoldedOf::Peak), "device 0;outer%3Bmain;" + kHostile +
                                                       " 4096\n"
                                                       "device 0;outer%3Bmain;libmodel.so+0x300 1536\n");
}

TEST(RenderExportTest, PerfettoCountersFollowTheTimeline) {
  TraceBuilder builder;
  Report report = sample_report(builder);
  const auto document = nlohmann::json::parse(render_perfetto(report));
  size_t max_samples = 0;
  for (const auto& event : document["traceEvents"]) {
    if (event["ph"] != "C" || event["name"] != "live bytes, all devices (max)") continue;
    const TimelineBucket& bucket = report.timeline.total.at(max_samples++);
    EXPECT_DOUBLE_EQ(event["ts"].get<double>(), static_cast<double>(bucket.start_ns) / 1000.0);
    EXPECT_EQ(event["args"]["bytes"].get<uint64_t>(), bucket.max_bytes);
  }
  EXPECT_EQ(max_samples, report.timeline.total.size());
  EXPECT_GT(max_samples, 0u);
  EXPECT_EQ(document["displayTimeUnit"], "ms");
}

TEST(RenderExportTest, TextHasASparklinePerDeviceAndKind) {
  TraceBuilder builder;
  Report report = sample_report(builder);
  ASSERT_EQ(report.timeline.series.size(), 2u);  // device 0: device and managed memory
  const std::string text = render_text(report);
  EXPECT_CONTAINS(text, "  device 0 device (up to 5.00 KiB)\n");
  EXPECT_CONTAINS(text, "  device 0 managed (up to 512 B)\n");
}

}  // namespace
}  // namespace gmt::analysis
