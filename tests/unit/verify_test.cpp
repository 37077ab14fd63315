// run --verify's cross-check (analysis/model/verify.h): the matching on its own, then whole traces where both
// driver-level backends recorded, as `run --verify` writes them: every figure counts each allocation once, a missing
// event is found and named by its backend, call, size and stack, and the report says so first.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/model/analyze.h"
#include "analysis/model/report.h"
#include "analysis/model/verify.h"
#include "analysis/read/events.h"
#include "analysis/render/render.h"
#include "trace_builder.h"

namespace gmt::analysis {
namespace {

using schema::Api;
using schema::EventKind;
using schema::MemoryKind;
using schema::Source;
using test_support::EventRow;
using test_support::TraceBuilder;

constexpr int64_t kMiB = 1024 * 1024;
constexpr int64_t kHooks = static_cast<int64_t>(Source::DriverHook);
constexpr int64_t kCupti = static_cast<int64_t>(Source::Cupti);

// One recorded event of one backend; ids follow the order of the list.
CheckedEvent event(bool counting, EventKind kind, uint64_t address, uint64_t size, int64_t thread = 7,
                   Api api = Api::cudaMalloc) {
  CheckedEvent e;
  e.counting = counting;  // the hooks count, CUPTI cross-checks
  e.source = static_cast<int64_t>(counting ? Source::DriverHook : Source::Cupti);
  e.kind = static_cast<int64_t>(kind);
  e.memory_kind = static_cast<int64_t>(MemoryKind::Device);
  e.address = address;
  e.size = size;
  e.thread_id = thread;
  e.api = static_cast<int64_t>(api);
  e.device = 0;
  return e;
}

std::vector<CheckedEvent> numbered(std::vector<CheckedEvent> events) {
  for (size_t i = 0; i < events.size(); ++i) events[i].id = static_cast<int64_t>(i + 1);
  return events;
}

// The two backends' records of: alloc A, alloc B, free A, alloc A again (the address reused), free B.
// The counting backend (hooks) records an allocation after CUPTI's exit callback, a free before CUPTI's entry one.
std::vector<CheckedEvent> both_backends_agree() {
  const bool hooks = true, cupti = false;
  return numbered({
      event(cupti, EventKind::Alloc, 0xA000, 4096),
      event(hooks, EventKind::Alloc, 0xA000, 4096),
      event(cupti, EventKind::Alloc, 0xB000, 8192),
      event(hooks, EventKind::Alloc, 0xB000, 8192),
      event(hooks, EventKind::Free, 0xA000, 0),
      event(cupti, EventKind::Free, 0xA000, 0),
      event(cupti, EventKind::Alloc, 0xA000, 4096),
      event(hooks, EventKind::Alloc, 0xA000, 4096),
      event(hooks, EventKind::Free, 0xB000, 0),
      event(cupti, EventKind::Free, 0xB000, 0),
  });
}

TEST(VerifyMatch, EveryEventOfOneCallPairsWithTheOtherBackends) {
  MatchResult result = match_events(both_backends_agree());
  EXPECT_EQ(result.matched, 5u);
  EXPECT_TRUE(result.unmatched.empty());
  EXPECT_EQ(result.named_differently, 0u);
}

TEST(VerifyMatch, AMissingEventOfEitherBackendIsLeftUnpaired) {
  // Each event in turn removed: exactly that event's partner is left, whichever backend lost it. A matching that
  // paired nothing, or everything, fails here.
  const std::vector<CheckedEvent> all = both_backends_agree();
  for (size_t dropped = 0; dropped < all.size(); ++dropped) {
    std::vector<CheckedEvent> events = all;
    events.erase(events.begin() + static_cast<long>(dropped));
    MatchResult result = match_events(events);
    ASSERT_EQ(result.unmatched.size(), 1u) << "dropped event " << dropped + 1;
    const CheckedEvent& left = result.unmatched.front();
    EXPECT_NE(left.counting, all[dropped].counting) << "the partner of the lost event is left, not the lost one";
    EXPECT_EQ(left.kind, all[dropped].kind);
    EXPECT_EQ(left.address, all[dropped].address);
    EXPECT_EQ(result.matched, 4u);
  }
}

TEST(VerifyMatch, AReusedAddressPairsCallByCall) {
  // The second allocation of 0xA000 (id 7) is missing from CUPTI: the hooks' second one (id 8) is the one left, not
  // the first (which pairs with CUPTI's first).
  std::vector<CheckedEvent> events = both_backends_agree();
  events.erase(events.begin() + 6);
  MatchResult result = match_events(events);
  ASSERT_EQ(result.unmatched.size(), 1u);
  EXPECT_EQ(result.unmatched.front().id, 8);
}

TEST(VerifyMatch, TheCallThatWasMissedIsTheOneNamed) {
  // One address and size used by three calls in a row; CUPTI missed the second. The hooks' record of that call is
  // left, not the third call's (which a pairing by key alone, oldest first, would leave instead).
  const bool hooks = true, cupti = false;
  std::vector<CheckedEvent> events = numbered({
      event(cupti, EventKind::Alloc, 0xA000, 4096),
      event(hooks, EventKind::Alloc, 0xA000, 4096),
      event(hooks, EventKind::Alloc, 0xA000, 4096),  // id 3: CUPTI's record of this call is missing
      event(cupti, EventKind::Alloc, 0xA000, 4096),
      event(hooks, EventKind::Alloc, 0xA000, 4096),
  });
  MatchResult result = match_events(events);
  EXPECT_EQ(result.matched, 2u);
  ASSERT_EQ(result.unmatched.size(), 1u);
  EXPECT_EQ(result.unmatched.front().id, 3);
}

TEST(VerifyMatch, RecordsPairOnlyInTheOrderTheBackendsWriteThem) {
  // An allocation is CUPTI's first (its exit callback runs inside the wrapper's call), a free the wrapper's first.
  const bool hooks = true, cupti = false;
  auto unpaired = [](std::vector<CheckedEvent> events) { return match_events(numbered(events)).unmatched.size(); };
  EXPECT_EQ(unpaired({event(cupti, EventKind::Alloc, 0xA000, 4096), event(hooks, EventKind::Alloc, 0xA000, 4096)}), 0u);
  EXPECT_EQ(unpaired({event(hooks, EventKind::Alloc, 0xA000, 4096), event(cupti, EventKind::Alloc, 0xA000, 4096)}), 2u);
  EXPECT_EQ(unpaired({event(hooks, EventKind::Free, 0xA000, 0), event(cupti, EventKind::Free, 0xA000, 0)}), 0u);
  EXPECT_EQ(unpaired({event(cupti, EventKind::Free, 0xA000, 0), event(hooks, EventKind::Free, 0xA000, 0)}), 2u);
  // Another thread's record in between changes nothing: each thread is its own sequence.
  EXPECT_EQ(unpaired({event(cupti, EventKind::Alloc, 0xA000, 4096, 7), event(cupti, EventKind::Alloc, 0xB000, 64, 8),
                      event(hooks, EventKind::Alloc, 0xA000, 4096, 7), event(hooks, EventKind::Alloc, 0xB000, 64, 8)}),
            0u);
}

TEST(VerifyMatch, PairsNeedTheSameThreadSizeKindAndAddress) {
  const bool hooks = true, cupti = false;
  auto unpaired = [](std::vector<CheckedEvent> events) { return match_events(numbered(events)).unmatched.size(); };
  EXPECT_EQ(
      unpaired({event(cupti, EventKind::Alloc, 0xA000, 4096, 7), event(hooks, EventKind::Alloc, 0xA000, 4096, 8)}), 2u);
  EXPECT_EQ(unpaired({event(cupti, EventKind::Alloc, 0xA000, 4096), event(hooks, EventKind::Alloc, 0xA000, 2048)}), 2u);
  EXPECT_EQ(unpaired({event(cupti, EventKind::Alloc, 0xA000, 4096), event(hooks, EventKind::Alloc, 0xA800, 4096)}), 2u);
  EXPECT_EQ(unpaired({event(cupti, EventKind::Free, 0xA000, 0), event(hooks, EventKind::Alloc, 0xA000, 0)}), 2u);
  // Two events of one backend never pair with each other.
  EXPECT_EQ(unpaired({event(hooks, EventKind::Alloc, 0xA000, 4096), event(hooks, EventKind::Alloc, 0xA000, 4096)}), 2u);
}

TEST(VerifyMatch, NamesAndDevicesMayDifferWithinAPair) {
  // A static cudart: CUPTI's runtime callbacks name the call, the hooks only see the driver function.
  std::vector<CheckedEvent> events = numbered({event(false, EventKind::Alloc, 0xA000, 4096, 7, Api::cudaMalloc),
                                               event(true, EventKind::Alloc, 0xA000, 4096, 7, Api::cuMemAlloc)});
  events[1].device = 1;
  MatchResult result = match_events(events);
  EXPECT_EQ(result.matched, 1u);
  EXPECT_TRUE(result.unmatched.empty());
  EXPECT_EQ(result.named_differently, 1u);
  EXPECT_EQ(result.on_other_device, 1u);
}

// A trace as run --verify writes it: hooks count (source 3), CUPTI cross-checks (source 2). `skip_cupti_id` leaves
// out CUPTI's record of that allocation (1-based, in the order below).
struct VerifyTrace {
  TraceBuilder builder;
  int64_t weights_stack = 0;
  int64_t step_stack = 0;

  explicit VerifyTrace(int skip_cupti_alloc = 0) {
    builder.meta(schema::meta::kBackend, schema::backend_names::kHooks);
    builder.meta(schema::meta::kBackendReason, schema::backend_reasons::kHooksBind);
    builder.meta(schema::meta::kVerifyBackend, schema::backend_names::kCupti);
    weights_stack = builder.stack({0x401000, 0x402000});
    step_stack = builder.stack({0x403000, 0x402000});
    builder.symbol(0x401000, "load_weights", "app.cu", 19);
    builder.symbol(0x403000, "train_step", "app.cu", 40);
    builder.symbol(0x402000, "main", "app.cu", 70);
    int alloc = 0;
    auto both_alloc = [&](int64_t time, int64_t address, int64_t size, int64_t stack) {
      ++alloc;
      EventRow row{.time_ns = time, .address = address, .size = size, .stack_id = stack, .source = kCupti};
      if (alloc != skip_cupti_alloc) builder.event(row);
      row.source = kHooks;
      builder.event(row);
    };
    auto both_free = [&](int64_t time, int64_t address) {
      EventRow row{.time_ns = time,
                   .kind = EventKind::Free,
                   .api = static_cast<int64_t>(Api::cudaFree),
                   .address = address,
                   .source = kHooks};
      builder.event(row);
      row.source = kCupti;
      builder.event(row);
    };
    both_alloc(10, 0x10000, 4 * kMiB, weights_stack);  // leaked
    for (int step = 0; step < 3; ++step) {
      both_alloc(100 + step * 100, 0x90000, 1 * kMiB, step_stack);
      both_free(150 + step * 100, 0x90000);
    }
  }
};

Report analyze(VerifyTrace& verify) {
  TraceFile trace = verify.builder.open();
  return analyze_trace(trace);
}

TEST(VerifyTrace, FiguresCountEachAllocationOnceAndTheBackendsAgree) {
  VerifyTrace verify;
  Report report = analyze(verify);
  EXPECT_EQ(report.totals.allocations, 4u);  // not 8: CUPTI's records are the cross-check's
  EXPECT_EQ(report.totals.frees, 3u);
  EXPECT_EQ(report.totals.leaked_bytes, uint64_t(4 * kMiB));
  EXPECT_EQ(report.totals.peak_bytes, uint64_t(5 * kMiB));
  EXPECT_EQ(report.totals.unmatched_frees, 0u);
  EXPECT_EQ(report.totals.inconsistencies, 0u);  // a second Alloc of a live address would be one
  ASSERT_TRUE(report.cross_check);
  const CrossCheck& check = *report.cross_check;
  EXPECT_TRUE(check.ran());
  EXPECT_EQ(check.counting_backend, "hooks");
  EXPECT_EQ(check.checking_backend, "cupti");
  EXPECT_EQ(check.counting_events, 7u);
  EXPECT_EQ(check.checking_events, 7u);
  EXPECT_EQ(check.matched, 7u);
  EXPECT_EQ(check.disagreements(), 0u);
  EXPECT_TRUE(check.groups.empty());

  std::string text = render_text(report, RenderOptions{});
  EXPECT_NE(text.find("Cross-check (run --verify): hooks and cupti agree: 7 events matched one to one, none seen "
                      "by only one backend\n"),
            std::string::npos)
      << text;
  nlohmann::json json = nlohmann::json::parse(render_json(report, RenderOptions{}));
  EXPECT_EQ(json["cross_check"]["matched"], 7);
  EXPECT_EQ(json["cross_check"]["disagreements"], 0);
  EXPECT_EQ(json["trace"]["backend_reason"], "hooks_bind");
}

TEST(VerifyTrace, AnAllocationOnlyOneBackendSawIsNamedFirstInTheReport) {
  VerifyTrace verify(/*skip_cupti_alloc=*/3);  // CUPTI missed the second train_step allocation
  Report report = analyze(verify);
  EXPECT_EQ(report.totals.allocations, 4u);  // the hooks' figures are unchanged
  ASSERT_TRUE(report.cross_check);
  const CrossCheck& check = *report.cross_check;
  EXPECT_EQ(check.only_counting, 1u);
  EXPECT_EQ(check.only_checking, 0u);
  EXPECT_EQ(check.matched, 6u);
  ASSERT_EQ(check.groups.size(), 1u);
  const Disagreement& group = check.groups.front();
  EXPECT_TRUE(group.seen_by_counting);
  EXPECT_EQ(group.kind, EventKind::Alloc);
  EXPECT_EQ(group.api, Api::cudaMalloc);
  EXPECT_EQ(group.bytes, uint64_t(kMiB));
  EXPECT_EQ(group.first_time_ns, 200);
  ASSERT_EQ(group.stack.frames.size(), 2u);
  EXPECT_EQ(group.stack.frames[0].function, "train_step");

  std::string text = render_text(report, RenderOptions{});
  const size_t section = text.find("Cross-check (run --verify): 1 event seen by only one backend\n");
  ASSERT_NE(section, std::string::npos) << text;
  EXPECT_LT(section, text.find("\nTotals\n")) << "the disagreement leads the report";
  EXPECT_NE(
      text.find("  only hooks saw: 1 allocation (cudaMalloc, device), 1.00 MiB (1048576 B), first at 200 ns (event "),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("    at train_step app.cu:40"), std::string::npos) << text;
  nlohmann::json json = nlohmann::json::parse(render_json(report, RenderOptions{}));
  EXPECT_EQ(json["cross_check"]["disagreements"], 1);
  EXPECT_EQ(json["cross_check"]["groups"][0]["seen_by"], "hooks");
  EXPECT_EQ(json["cross_check"]["groups"][0]["missed_by"], "cupti");
  EXPECT_EQ(json["cross_check"]["groups"][0]["stack"][0]["function"], "train_step");
}

TEST(VerifyTrace, ACrossCheckThatCouldNotRunIsSaidAndNotClean) {
  TraceBuilder builder;
  builder.meta(schema::meta::kBackend, schema::backend_names::kHooks);
  builder.meta(schema::meta::kVerifyUnavailable, "CUPTI is held by another tool");
  builder.event({.time_ns = 10, .address = 0x1000, .size = 4096, .source = kHooks});
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  ASSERT_TRUE(report.cross_check);
  EXPECT_FALSE(report.cross_check->ran());
  EXPECT_EQ(report.totals.allocations, 1u);
  std::string text = render_text(report, RenderOptions{});
  EXPECT_NE(text.find("Cross-check (run --verify): did not run: CUPTI is held by another tool\n"), std::string::npos)
      << text;
  nlohmann::json json = nlohmann::json::parse(render_json(report, RenderOptions{}));
  EXPECT_EQ(json["cross_check"]["ran"], false);
  EXPECT_EQ(json["cross_check"]["checking_backend"], nullptr);
}

TEST(VerifyTrace, OrdinaryTracesHaveNoCrossCheckAndCountEverySource) {
  TraceBuilder builder;  // backend runtime, no verify keys
  builder.event({.time_ns = 10, .address = 0x1000, .size = 4096, .source = kCupti});
  TraceFile trace = builder.open();
  EXPECT_EQ(without_cross_check(trace), "");
  Report report = analyze_trace(trace);
  EXPECT_FALSE(report.cross_check);
  EXPECT_EQ(report.totals.allocations, 1u);
  nlohmann::json json = nlohmann::json::parse(render_json(report, RenderOptions{}));
  EXPECT_TRUE(json["cross_check"].is_null());
}

TEST(VerifyTrace, ATraceThatNamesOneBackendTwiceLeavesNothingOut) {
  TraceBuilder builder;
  builder.meta(schema::meta::kBackend, schema::backend_names::kHooks);
  builder.meta(schema::meta::kVerifyBackend, schema::backend_names::kHooks);  // damaged: never drop the counted events
  builder.event({.time_ns = 10, .address = 0x1000, .size = 4096, .source = kHooks});
  TraceFile trace = builder.open();
  EXPECT_EQ(without_cross_check(trace), "");
  Report report = analyze_trace(trace);
  EXPECT_EQ(report.totals.allocations, 1u);
  ASSERT_TRUE(report.cross_check);
  EXPECT_FALSE(report.cross_check->ran());
}

}  // namespace
}  // namespace gmt::analysis
