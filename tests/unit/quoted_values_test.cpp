// Values from the trace that look like SQL (quotes, semicolons, comments) are data, never part of a query:
// every statement binds them. A symbol, a file name, the command line and the stop reason written that way
// come back out of the analysis and the renderers exactly, and the trace is not changed by reading it.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/model/analyze.h"
#include "analysis/model/report.h"
#include "analysis/render/render.h"
#include "trace_builder.h"

namespace gmt::analysis {
namespace {

using test_support::TraceBuilder;

const char* const kFunction = R"(leak'); DROP TABLE events; --)";
const char* const kFile = R"(src/it's "quoted".cu)";
const char* const kCommandLine = R"(./app --name "a'b" ; DELETE FROM meta; --)";
const char* const kStopReason = R"(disk full: it's '); DROP TABLE stacks; --)";

TEST(QuotedValuesTest, SqlLookingValuesAreReadBackAsData) {
  TraceBuilder builder;
  int64_t app = builder.module(R"(/opt/o'brien/app)", 0x400000, 0x10000);
  builder.symbol(0x401234, kFunction, kFile, 12, app);
  int64_t stack = builder.stack({0x401234});
  builder.alloc(1000, 0x1000, 4096, stack);
  builder.alloc(2000, 0x2000, 100, stack);
  builder.free(3000, 0x2000);
  builder.meta(schema::meta::kCommandLine, kCommandLine);
  builder.meta(schema::meta::kComplete, "0");
  builder.meta(schema::meta::kStopReason, kStopReason);
  TraceFile trace = builder.open();

  Report report = analyze_trace(trace);
  EXPECT_EQ(report.totals.allocations, 2u);
  EXPECT_EQ(report.totals.frees, 1u);
  EXPECT_EQ(report.totals.leaked_bytes, 4096u);
  ASSERT_EQ(report.leaks.size(), 1u);
  ASSERT_FALSE(report.leaks[0].stack.frames.empty());
  EXPECT_EQ(report.leaks[0].stack.frames[0].function, kFunction);
  EXPECT_EQ(report.leaks[0].stack.frames[0].file, kFile);
  EXPECT_EQ(report.trace.command_line, kCommandLine);
  EXPECT_EQ(report.trace.stop_reason, kStopReason);

  nlohmann::json json = nlohmann::json::parse(render_json(report));
  EXPECT_EQ(json["leaks"][0]["stack"][0]["function"], kFunction);
  EXPECT_EQ(json["trace"]["stop_reason"], kStopReason);
  std::string text = render_text(report);
  EXPECT_NE(text.find(std::string("recording stopped early: ") + kStopReason), std::string::npos) << text;

  // Reading did not run any of it: a second analysis of the same file sees the same tables.
  Report again = analyze_trace(trace);
  EXPECT_EQ(again.trace.event_count, 3u);
  EXPECT_EQ(again.leaks.size(), 1u);
}

}  // namespace
}  // namespace gmt::analysis
