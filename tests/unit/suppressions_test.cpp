// Suppressions: the file format, glob matching, and what the model does with suppressed leaks (exact bytes
// in the rule's account, out of the leaks and totals, unused rules listed).
#include <gtest/gtest.h>

#include <fstream>

#include "analysis/model/analyze.h"
#include "analysis/model/report.h"
#include "analysis/model/suppressions.h"
#include "analysis/render/render.h"
#include "trace_builder.h"

namespace gmt::analysis {
namespace {

using test_support::TraceBuilder;

constexpr int64_t kKiB = 1024;

TEST(SuppressionsTest, GlobMatchesStarsAndQuestionMarks) {
  EXPECT_TRUE(glob_match("load_weights", "load_weights"));
  EXPECT_FALSE(glob_match("load_weights", "load_weights2"));
  EXPECT_TRUE(glob_match("*load_weights*", "(anonymous namespace)::load_weights(unsigned long)"));
  EXPECT_TRUE(glob_match("libnccl.so*", "libnccl.so.2"));
  EXPECT_FALSE(glob_match("libnccl.so*", "libnccl-net.so"));
  EXPECT_TRUE(glob_match("lib?ccl.so.2", "libnccl.so.2"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_FALSE(glob_match("?", ""));
  EXPECT_TRUE(glob_match("*/third_party/*.cu", "/src/third_party/nccl/alloc.cu"));
  EXPECT_TRUE(glob_match("a*b*c", "aXXbYYbZc"));
  EXPECT_FALSE(glob_match("a*b*c", "aXXbYYbZ"));
}

TEST(SuppressionsTest, ParsesRulesCommentsAndBlankLines) {
  SuppressionSet set;
  parse_suppressions("# known leaks\n\nleak:load_weights\n  leak-module: libnccl.so*  \nleak-file:*/vendor/*\r\n",
                     "ci.supp", set);
  ASSERT_EQ(set.rules.size(), 3u);
  EXPECT_EQ(set.rules[0].field, SuppressionRule::Field::Function);
  EXPECT_EQ(set.rules[0].pattern, "load_weights");
  EXPECT_EQ(set.rules[0].origin, "ci.supp:3");
  EXPECT_EQ(set.rules[1].field, SuppressionRule::Field::Module);
  EXPECT_EQ(set.rules[1].pattern, "libnccl.so*");
  EXPECT_EQ(set.rules[1].text, "leak-module: libnccl.so*");
  EXPECT_EQ(set.rules[1].origin, "ci.supp:4");
  EXPECT_EQ(set.rules[2].field, SuppressionRule::Field::File);
  EXPECT_EQ(set.rules[2].pattern, "*/vendor/*");
}

TEST(SuppressionsTest, MalformedLinesNameFileAndLine) {
  SuppressionSet set;
  try {
    parse_suppressions("leak:ok\n# fine\ninterceptor_via_fun:foo\n", "ci.supp", set);
    FAIL() << "no error";
  } catch (const SuppressionError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("ci.supp:3: 'interceptor_via_fun:foo' is not a suppression", 0), 0u)
        << e.what();
  }
  EXPECT_THROW(parse_suppressions("leak:\n", "x", set), SuppressionError);
  EXPECT_THROW(parse_suppressions("leak-module:   \n", "x", set), SuppressionError);
  EXPECT_THROW(load_suppressions({"/nonexistent/file.supp"}), SuppressionError);
}

TEST(SuppressionsTest, LoadsSeveralFilesInOrder) {
  TraceBuilder scratch;  // only for its temporary directory
  const std::string first = (scratch.dir() / "a.supp").string();
  const std::string second = (scratch.dir() / "b.supp").string();
  std::ofstream(first) << "leak:one\n";
  std::ofstream(second) << "\nleak-file:two.cu\n";
  SuppressionSet set = load_suppressions({first, second});
  ASSERT_EQ(set.rules.size(), 2u);
  EXPECT_EQ(set.rules[0].origin, first + ":1");
  EXPECT_EQ(set.rules[1].origin, second + ":2");
}

// Three leak sites: weights (app, symbolized), an NCCL buffer (only its module is known) and a workspace
// whose inner frame is in a vendored file.
struct ThreeLeaks {
  TraceBuilder builder;
  int64_t weights = 0, nccl = 0, workspace = 0;
  ThreeLeaks() {
    int64_t app = builder.module("/opt/app/bin/trainer", 0x400000, 0x100000);
    int64_t libnccl = builder.module("/usr/lib/x86_64-linux-gnu/libnccl.so.2", 0x7f0000000000, 0x100000);
    builder.symbol(0x401000, "load_weights", "src/model.cpp", 10, app);
    builder.symbol(0x402000, "main", "src/main.cpp", 5, app);
    builder.symbol(0x7f0000001000, std::nullopt, std::nullopt, std::nullopt, libnccl);
    builder.symbol(0x403000, "make_workspace", "/src/vendor/ws.cu", 7, app);
    weights = builder.stack({0x401000, 0x402000});
    nccl = builder.stack({0x7f0000001000, 0x402000});
    workspace = builder.stack({0x403000, 0x402000});
    builder.alloc(10, 0x1000, 64 * kKiB, weights);
    builder.alloc(20, 0x20000, 8 * kKiB, nccl);
    builder.alloc(30, 0x30000, 8 * kKiB, nccl);
    builder.alloc(40, 0x40000, 4 * kKiB, workspace);
  }
};

Report analyze_with(ThreeLeaks& trace, const std::string& rules) {
  SuppressionSet set;
  parse_suppressions(rules, "s", set);
  AnalyzeOptions options;
  options.suppressions = &set;
  TraceFile file = trace.builder.open();
  return analyze_trace(file, options);
}

TEST(SuppressionsTest, SuppressedLeaksLeaveTheLeaksAndTotalsAndAreCountedPerRule) {
  ThreeLeaks trace;
  Report report = analyze_with(trace, "leak-module:libnccl.so*\nleak-file:*/vendor/*\nleak:never_called\n");

  ASSERT_EQ(report.leaks.size(), 1u);
  EXPECT_EQ(report.leaks[0].stack.id, trace.weights);
  EXPECT_EQ(report.totals.leaked_bytes, uint64_t(64 * kKiB));
  EXPECT_EQ(report.totals.leaked_allocations, 1u);
  EXPECT_EQ(report.leaked_by_kind.device, uint64_t(64 * kKiB));
  EXPECT_EQ(report.leak_groups_total, 1u);
  EXPECT_EQ(report.totals.allocations, 4u);  // suppression changes what counts as leaked, nothing else

  ASSERT_EQ(report.suppressed.size(), 3u);
  EXPECT_EQ(report.suppressed[0].rule, "leak-module:libnccl.so*");
  EXPECT_EQ(report.suppressed[0].origin, "s:1");
  EXPECT_EQ(report.suppressed[0].bytes, uint64_t(16 * kKiB));
  EXPECT_EQ(report.suppressed[0].count, 2u);
  EXPECT_EQ(report.suppressed[0].groups, 1u);
  EXPECT_EQ(report.suppressed[1].bytes, uint64_t(4 * kKiB));
  EXPECT_EQ(report.suppressed[1].count, 1u);
  EXPECT_EQ(report.suppressed[2].rule, "leak:never_called");
  EXPECT_EQ(report.suppressed[2].count, 0u);  // unused: reported, not an error
  EXPECT_EQ(report.suppressed[2].bytes, 0u);

  // Breakdowns count what is still leaked after suppressions: the module row of NCCL keeps its allocations.
  bool found_nccl = false;
  for (const BreakdownRow& row : report.breakdown.by_module) {
    if (row.module != "libnccl.so.2") continue;
    found_nccl = true;
    EXPECT_EQ(row.allocated_bytes, uint64_t(16 * kKiB));
    EXPECT_EQ(row.leaked_bytes, 0u);
  }
  EXPECT_TRUE(found_nccl);

  const std::string text = render_text(report);
  EXPECT_NE(text.find("Suppressed leaks (20.00 KiB (20480 B) in 3 allocations"), std::string::npos) << text;
  EXPECT_NE(text.find("leak:never_called  unused: matched no leak (s:3)"), std::string::npos) << text;
  const std::string json = render_json(report);
  EXPECT_NE(json.find("\"rule\": \"leak-file:*/vendor/*\""), std::string::npos);
}

TEST(SuppressionsTest, TheFirstMatchingRuleTakesTheLeak) {
  ThreeLeaks trace;
  // Every stack has main in it: the first rule takes all three sites, the later one matches nothing.
  Report report = analyze_with(trace, "leak:main\nleak:load_weights\n");
  EXPECT_TRUE(report.leaks.empty());
  EXPECT_EQ(report.totals.leaked_bytes, 0u);
  EXPECT_EQ(report.totals.leaked_allocations, 0u);
  ASSERT_EQ(report.suppressed.size(), 2u);
  EXPECT_EQ(report.suppressed[0].bytes, uint64_t(84 * kKiB));
  EXPECT_EQ(report.suppressed[0].count, 4u);
  EXPECT_EQ(report.suppressed[0].groups, 3u);
  EXPECT_EQ(report.suppressed[1].count, 0u);
}

}  // namespace
}  // namespace gmt::analysis
