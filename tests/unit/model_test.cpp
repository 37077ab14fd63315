// analyze_trace on handmade traces: every expected number is worked out by hand in the comments.
#include <gtest/gtest.h>

#include "analysis/model/analyze.h"
#include "analysis/model/report.h"
#include "trace_builder.h"

namespace gmt::analysis {
namespace {

using schema::Api;
using schema::MemoryKind;
using test_support::EventRow;
using test_support::TraceBuilder;

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * kKiB;
constexpr int64_t kGiB = 1024 * kMiB;

Report analyze(TraceBuilder& builder, const AnalyzeOptions& options = {}) {
  TraceFile trace = builder.open();
  return analyze_trace(trace, options);
}

TEST(ModelTest, LeaksAreGroupedByStackLargestFirst) {
  TraceBuilder builder;
  int64_t a = builder.stack({0x401000});
  int64_t b = builder.stack({0x402000});
  int64_t c = builder.stack({0x403000});
  int64_t d = builder.stack({0x404000});
  int64_t e = builder.stack({0x405000});
  int64_t f = builder.stack({0x406000});
  builder.alloc(10, 0x1000, 4 * kMiB, a);  // leaks
  builder.alloc(20, 0x2000, 1 * kMiB, b);  // b leaks twice: 2 MiB in 2
  builder.alloc(30, 0x3000, 1 * kMiB, b);
  builder.alloc(40, 0x4000, 8 * kMiB, c);  // freed: no group
  builder.free(50, 0x4000);
  builder.alloc(60, 0x5000, 2 * kMiB, d);  // 2 MiB like b, but in 1: after b
  builder.alloc(70, 0x6000, 1 * kMiB, f);  // e and f tie on bytes and count: stack id decides
  builder.alloc(80, 0x7000, 1 * kMiB, e);

  Report report = analyze(builder);
  ASSERT_EQ(report.leaks.size(), 5u);
  std::vector<int64_t> order;
  for (const LeakGroup& group : report.leaks) order.push_back(group.stack.id);
  EXPECT_EQ(order, (std::vector<int64_t>{a, b, d, e, f}));
  EXPECT_EQ(report.leaks[0].bytes, uint64_t(4 * kMiB));
  EXPECT_EQ(report.leaks[0].count, 1u);
  EXPECT_EQ(report.leaks[1].bytes, uint64_t(2 * kMiB));
  EXPECT_EQ(report.leaks[1].count, 2u);
  EXPECT_EQ(report.leaks[1].first_alloc_ns, 20);
  EXPECT_EQ(report.leaks[1].last_alloc_ns, 30);
  EXPECT_EQ(report.leaks[1].memory_kinds, std::vector<MemoryKind>{MemoryKind::Device});
  EXPECT_EQ(report.leaks[1].apis, std::vector<Api>{Api::cudaMalloc});
  EXPECT_EQ(report.leaks[1].devices, std::vector<int64_t>{0});
  ASSERT_EQ(report.leaks[1].stack.frames.size(), 1u);
  EXPECT_EQ(report.leaks[1].stack.frames[0].pc, 0x402000u);

  EXPECT_EQ(report.totals.allocations, 7u);
  EXPECT_EQ(report.totals.allocated_bytes, uint64_t(18 * kMiB));
  EXPECT_EQ(report.totals.frees, 1u);
  EXPECT_EQ(report.totals.leaked_bytes, uint64_t(10 * kMiB));
  EXPECT_EQ(report.totals.leaked_allocations, 6u);
  EXPECT_EQ(report.totals.unmatched_frees, 0u);
  EXPECT_EQ(report.totals.inconsistencies, 0u);
  EXPECT_EQ(report.leak_groups_total, 5u);
  // Live: 4, 5, 6, 14 (at 40), 6, 8, 9, 10 MiB.
  EXPECT_EQ(report.totals.peak_bytes, uint64_t(14 * kMiB));
  EXPECT_EQ(report.totals.peak_time_ns, 40);
  EXPECT_EQ(report.leaked_by_kind.device, uint64_t(10 * kMiB));
}

TEST(ModelTest, FreesOfUnknownAddressesAreCountedNotFatal) {
  TraceBuilder builder;
  builder.free(5, 0);  // cudaFree(0), the idiom that creates the context: neither matched nor unmatched
  builder.alloc(10, 0x1000, 256);
  builder.free(20, 0x9999);  // never allocated
  builder.free(30, 0x1000);
  builder.free(40, 0x1000);  // double free
  Report report = analyze(builder);
  EXPECT_EQ(report.totals.allocations, 1u);
  EXPECT_EQ(report.totals.frees, 1u);
  EXPECT_EQ(report.totals.unmatched_frees, 2u);
  EXPECT_EQ(report.totals.leaked_bytes, 0u);
  EXPECT_TRUE(report.leaks.empty());
  EXPECT_EQ(report.totals.inconsistencies, 0u);
}

TEST(ModelTest, AllocOnLiveAddressReplacesItAndCountsAnInconsistency) {
  TraceBuilder builder;
  int64_t first = builder.stack({0x401000});
  int64_t second = builder.stack({0x402000});
  builder.alloc(10, 0x1000, 100, first);
  builder.alloc(20, 0x1000, 300, second);  // the free of the first was never seen
  builder.alloc(30, 0x2000, 50, first);
  Report report = analyze(builder);
  EXPECT_EQ(report.totals.inconsistencies, 1u);
  EXPECT_EQ(report.totals.allocations, 3u);
  EXPECT_EQ(report.totals.leaked_bytes, 350u);
  EXPECT_EQ(report.totals.leaked_allocations, 2u);
  ASSERT_EQ(report.leaks.size(), 2u);
  EXPECT_EQ(report.leaks[0].stack.id, second);
  EXPECT_EQ(report.leaks[0].bytes, 300u);
  EXPECT_EQ(report.leaks[1].stack.id, first);
  EXPECT_EQ(report.leaks[1].bytes, 50u);
  // Live: 100, then 300 (the replaced 100 is gone), then 350.
  EXPECT_EQ(report.totals.peak_bytes, 350u);
  EXPECT_EQ(report.totals.peak_time_ns, 30);
}

TEST(ModelTest, PeakIsTheFirstTimeTheMaximumIsReached) {
  TraceBuilder builder;
  builder.alloc(1000, 0xa000, 1 * kMiB);  // 1
  builder.alloc(2000, 0xb000, 2 * kMiB);  // 3
  builder.free(3000, 0xa000);             // 2
  builder.alloc(4000, 0xc000, 4 * kMiB);  // 6: the peak
  builder.free(5000, 0xb000);             // 4
  builder.alloc(6000, 0xd000, 2 * kMiB);  // 6 again: not a new peak
  builder.free(7000, 0xc000);
  builder.free(8000, 0xd000);
  Report report = analyze(builder);
  EXPECT_EQ(report.totals.peak_bytes, uint64_t(6 * kMiB));
  EXPECT_EQ(report.totals.peak_time_ns, 4000);
  EXPECT_EQ(report.peak_by_kind.device, uint64_t(6 * kMiB));
  EXPECT_EQ(report.peak_time_ns_by_kind.device, 4000);
  EXPECT_EQ(report.totals.frees, 4u);
  EXPECT_TRUE(report.leaks.empty());
}

TEST(ModelTest, EventsAreOrderedByTimeThenId) {
  TraceBuilder builder;
  builder.free(100, 0x1000);  // id 1, but after the alloc in time: matches it
  builder.alloc(50, 0x1000, 10);
  builder.alloc(200, 0x2000, 20);  // same time: recording order (id) decides, alloc first
  builder.free(200, 0x2000);
  builder.free(300, 0x3000);  // same time, free recorded first: unmatched, and the alloc leaks
  builder.alloc(300, 0x3000, 30);
  Report report = analyze(builder);
  EXPECT_EQ(report.totals.frees, 2u);
  EXPECT_EQ(report.totals.unmatched_frees, 1u);
  EXPECT_EQ(report.totals.leaked_bytes, 30u);
}

TEST(ModelTest, EachMemoryKindHasItsOwnPeak) {
  TraceBuilder builder;
  builder.alloc(1, 0xa000, 10, 0, Api::cudaMalloc, MemoryKind::Device);
  builder.alloc(2, 0xb000, 20, 0, Api::cudaMallocManaged, MemoryKind::Managed);
  builder.free(3, 0xa000);
  builder.alloc(4, 0xc000, 5, 0, Api::cudaMallocHost, MemoryKind::HostPinned);
  builder.alloc(5, 0xd000, 15, 0, Api::cudaMallocManaged, MemoryKind::Managed);
  Report report = analyze(builder);
  // Total live: 10, 30, 20, 25, 40.
  EXPECT_EQ(report.totals.peak_bytes, 40u);
  EXPECT_EQ(report.totals.peak_time_ns, 5);
  EXPECT_EQ(report.peak_by_kind.device, 10u);
  EXPECT_EQ(report.peak_time_ns_by_kind.device, 1);
  EXPECT_EQ(report.peak_by_kind.managed, 35u);
  EXPECT_EQ(report.peak_time_ns_by_kind.managed, 5);
  EXPECT_EQ(report.peak_by_kind.host_pinned, 5u);
  EXPECT_EQ(report.peak_time_ns_by_kind.host_pinned, 4);
  EXPECT_EQ(report.leaked_by_kind.device, 0u);
  EXPECT_EQ(report.leaked_by_kind.managed, 35u);
  EXPECT_EQ(report.leaked_by_kind.host_pinned, 5u);
  ASSERT_EQ(report.leaks.size(), 1u);  // all without a stack: one group
  EXPECT_EQ(report.leaks[0].stack.id, 0);
  EXPECT_FALSE(report.leaks[0].stack.missing);
  EXPECT_EQ(report.leaks[0].memory_kinds, (std::vector<MemoryKind>{MemoryKind::Managed, MemoryKind::HostPinned}));
  EXPECT_EQ(report.leaks[0].apis, (std::vector<Api>{Api::cudaMallocManaged, Api::cudaMallocHost}));
  EXPECT_EQ(report.leaks[0].first_alloc_ns, 2);
  EXPECT_EQ(report.leaks[0].last_alloc_ns, 5);
}

TEST(ModelTest, FailuresCarryDeviceFreeWhenRecorded) {
  TraceBuilder builder;
  int64_t stack = builder.stack({0x401000, 0x402000});
  builder.alloc_failed(100, 16 * kGiB, 2, stack, 1 * kGiB, 80 * kGiB);
  builder.alloc_failed(200, 1 * kMiB, 2, 0, std::nullopt, std::nullopt, 1);
  Report report = analyze(builder);
  EXPECT_EQ(report.totals.failed_allocations, 2u);
  EXPECT_EQ(report.totals.allocations, 0u);
  EXPECT_EQ(report.totals.peak_bytes, 0u);
  ASSERT_EQ(report.failures.size(), 2u);
  const AllocFailure& first = report.failures[0];
  EXPECT_EQ(first.time_ns, 100);
  EXPECT_EQ(first.requested_bytes, uint64_t(16 * kGiB));
  EXPECT_EQ(first.error, 2);
  EXPECT_EQ(first.api, Api::cudaMalloc);
  EXPECT_EQ(first.device, 0);
  EXPECT_EQ(first.device_free, 1 * kGiB);
  EXPECT_EQ(first.device_total, 80 * kGiB);
  EXPECT_EQ(first.stack.id, stack);
  EXPECT_EQ(first.stack.frames.size(), 2u);
  const AllocFailure& second = report.failures[1];
  EXPECT_EQ(second.time_ns, 200);
  EXPECT_EQ(second.device, 1);
  EXPECT_FALSE(second.device_free.has_value());
  EXPECT_FALSE(second.device_total.has_value());
}

TEST(ModelTest, NegativeSizesAndNullPointersAreInconsistenciesNotCrashes) {
  TraceBuilder builder;
  builder.alloc(10, 0x1000, -5);    // ignored
  builder.free(20, 0x1000);         // so this free matches nothing
  builder.alloc(30, 0, 0);          // cudaMalloc(&p, 0) may give NULL: an allocation, never live
  builder.alloc(40, 0, 100);        // NULL with a size cannot be right: ignored
  builder.alloc_failed(50, -1, 2);  // counted as a failure, request unknown
  builder.alloc(60, 0x2000, 7, 0, Api::cudaMalloc, static_cast<MemoryKind>(9));  // unknown kind
  builder.event(EventRow{.time_ns = 70, .kind = static_cast<schema::EventKind>(42), .api = 200});
  Report report = analyze(builder);
  EXPECT_EQ(report.totals.inconsistencies, 4u);
  EXPECT_EQ(report.totals.allocations, 2u);
  EXPECT_EQ(report.totals.unmatched_frees, 1u);
  EXPECT_EQ(report.totals.failed_allocations, 1u);
  ASSERT_EQ(report.failures.size(), 1u);
  EXPECT_EQ(report.failures[0].requested_bytes, 0u);
  // The unknown-kind allocation is still a leak, but not part of any counted kind or the peak.
  EXPECT_EQ(report.totals.leaked_bytes, 7u);
  ASSERT_EQ(report.leaks.size(), 1u);
  EXPECT_EQ(report.leaks[0].memory_kinds, std::vector<MemoryKind>{MemoryKind::None});
  EXPECT_EQ(report.totals.peak_bytes, 0u);
  EXPECT_EQ(report.trace.event_count, 7u);
}

TEST(ModelTest, MissingStackGivesAnEmptyFlaggedStack) {
  TraceBuilder builder;
  int64_t empty = builder.stack({});
  builder.alloc(10, 0x1000, 64, 77);  // no stacks row 77
  builder.alloc(20, 0x2000, 32, empty);
  builder.alloc(30, 0x3000, 16, 0);
  Report report = analyze(builder);
  ASSERT_EQ(report.leaks.size(), 3u);
  EXPECT_EQ(report.leaks[0].stack.id, 77);
  EXPECT_TRUE(report.leaks[0].stack.missing);
  EXPECT_TRUE(report.leaks[0].stack.frames.empty());
  EXPECT_EQ(report.leaks[1].stack.id, empty);
  EXPECT_FALSE(report.leaks[1].stack.missing);
  EXPECT_TRUE(report.leaks[1].stack.frames.empty());
  EXPECT_EQ(report.leaks[2].stack.id, 0);
  EXPECT_FALSE(report.leaks[2].stack.missing);
}

TEST(ModelTest, FramesJoinSymbolsAndFindModules) {
  TraceBuilder builder;
  int64_t app = builder.module("/opt/app/bin/app", 0x400000, 0x10000);
  builder.module("/usr/lib/libfoo.so", 0x7f0000000000, 0x100000);
  builder.symbol(0x401234, "leak_a(int)", "src/a.cu", 12, app);
  builder.symbol(0x402000, std::nullopt, "", 0, std::nullopt);  // symbolizer found nothing
  int64_t stack = builder.stack({0x401234, 0x7f0000001000, 0x402000, 0x410000, 0x900000});
  builder.alloc(10, 0x1000, 64, stack);
  Report report = analyze(builder);
  ASSERT_EQ(report.leaks.size(), 1u);
  const std::vector<Frame>& frames = report.leaks[0].stack.frames;
  ASSERT_EQ(frames.size(), 5u);

  EXPECT_EQ(frames[0].level, 0);
  EXPECT_EQ(frames[0].pc, 0x401234u);
  EXPECT_EQ(frames[0].function, "leak_a(int)");
  EXPECT_EQ(frames[0].file, "src/a.cu");
  EXPECT_EQ(frames[0].line, 12);
  EXPECT_EQ(frames[0].module, "/opt/app/bin/app");

  // No symbols row: unknown function, module from the address ranges.
  EXPECT_EQ(frames[1].level, 1);
  EXPECT_FALSE(frames[1].function.has_value());
  EXPECT_FALSE(frames[1].file.has_value());
  EXPECT_FALSE(frames[1].line.has_value());
  EXPECT_EQ(frames[1].module, "/usr/lib/libfoo.so");

  // A symbols row with NULL/empty fields and no module id.
  EXPECT_FALSE(frames[2].function.has_value());
  EXPECT_FALSE(frames[2].file.has_value());
  EXPECT_FALSE(frames[2].line.has_value());
  EXPECT_EQ(frames[2].module, "/opt/app/bin/app");

  // A return address just past the module's end still belongs to it (the call is inside).
  EXPECT_EQ(frames[3].module, "/opt/app/bin/app");
  EXPECT_FALSE(frames[4].module.has_value());
}

TEST(ModelTest, TraceInfoOfACompleteRun) {
  TraceBuilder builder;
  builder.alloc(10, 0x1000, 64);
  Report report = analyze(builder);
  EXPECT_EQ(report.trace.path, builder.path());
  EXPECT_EQ(report.trace.pid, 4242);
  EXPECT_EQ(report.trace.command_line, "./app --iterations 3");
  EXPECT_EQ(report.trace.backend, schema::backend_names::kRuntime);
  EXPECT_EQ(report.trace.schema_version, schema::kSchemaVersion);
  EXPECT_EQ(report.trace.duration_ns, TraceBuilder::kEndNs - TraceBuilder::kStartNs);
  EXPECT_FALSE(report.trace.duration_from_events);
  EXPECT_TRUE(report.trace.complete);
  EXPECT_FALSE(report.trace.simulated);
  EXPECT_TRUE(report.trace.symbolized);
  EXPECT_EQ(report.trace.dropped_events, 0u);
  EXPECT_EQ(report.trace.event_count, 1u);
}

TEST(ModelTest, TraceInfoOfAnIncompleteSimulatedRun) {
  TraceBuilder builder;
  builder.meta(schema::meta::kComplete, "0")
      .meta(schema::meta::kSimulated, "1")
      .meta(schema::meta::kSymbolized, "0")
      .meta(schema::meta::kDroppedEvents, "3")
      .meta(schema::meta::kPid, "not a number")  // malformed: reported as unknown, not fatal
      .remove_meta(schema::meta::kEndMonotonicNs);
  builder.alloc(1000, 0x1000, 64);
  builder.alloc(2500, 0x2000, 64);
  Report report = analyze(builder);
  EXPECT_FALSE(report.trace.complete);
  EXPECT_TRUE(report.trace.simulated);
  EXPECT_FALSE(report.trace.symbolized);
  EXPECT_EQ(report.trace.dropped_events, 3u);
  EXPECT_FALSE(report.trace.pid.has_value());
  EXPECT_EQ(report.trace.duration_ns, 2500);
  EXPECT_TRUE(report.trace.duration_from_events);
}

TEST(ModelTest, WithoutStartMetaTheFirstEventIsTimeZero) {
  TraceBuilder builder;
  builder.remove_meta(schema::meta::kStartMonotonicNs).remove_meta(schema::meta::kEndMonotonicNs);
  builder.alloc(100, 0x1000, 64);
  builder.alloc(300, 0x2000, 64);
  Report report = analyze(builder);
  EXPECT_EQ(report.totals.peak_time_ns, 200);
  EXPECT_EQ(report.leaks[0].first_alloc_ns, 0);
  EXPECT_EQ(report.leaks[0].last_alloc_ns, 200);
  EXPECT_EQ(report.trace.duration_ns, 200);
}

TEST(ModelTest, MinBytesDropsSmallGroupsButNotTotals) {
  TraceBuilder builder;
  int64_t big = builder.stack({0x401000});
  int64_t small = builder.stack({0x402000});
  builder.alloc(10, 0x1000, 1 * kMiB, big);
  builder.alloc(20, 0x2000, 100, small);
  builder.alloc(30, 0x3000, 100, small);
  Report report = analyze(builder, AnalyzeOptions{.min_bytes = 1 * kKiB});
  ASSERT_EQ(report.leaks.size(), 1u);
  EXPECT_EQ(report.leaks[0].stack.id, big);
  EXPECT_EQ(report.leak_groups_total, 2u);
  EXPECT_EQ(report.leak_groups_below_min_bytes, 1u);
  EXPECT_EQ(report.leaked_bytes_below_min_bytes, 200u);
  EXPECT_EQ(report.totals.leaked_bytes, uint64_t(1 * kMiB + 200));
  EXPECT_EQ(report.totals.leaked_allocations, 3u);
  EXPECT_EQ(report.min_bytes, uint64_t(1 * kKiB));
}

TEST(ModelTest, EmptyTraceIsClean) {
  TraceBuilder builder;
  Report report = analyze(builder);
  EXPECT_EQ(report.totals.allocations, 0u);
  EXPECT_EQ(report.totals.frees, 0u);
  EXPECT_EQ(report.totals.leaked_bytes, 0u);
  EXPECT_EQ(report.totals.peak_bytes, 0u);
  EXPECT_EQ(report.totals.peak_time_ns, 0);
  EXPECT_TRUE(report.leaks.empty());
  EXPECT_TRUE(report.failures.empty());
  EXPECT_EQ(report.trace.event_count, 0u);
}

}  // namespace
TEST(ModelTest, StacksThatResolveToTheSameLinesAreOneLeakGroup) {
  // An unrolled loop calls one source line from several pcs: one group for the reader, not three.
  TraceBuilder builder;
  int64_t module = builder.module("/app", 0x1000, 0x10000);
  int64_t first = builder.stack({0x1100, 0x1900});
  int64_t second = builder.stack({0x1200, 0x1910});
  int64_t other = builder.stack({0x1300, 0x1920});
  for (uint64_t pc : {0x1100, 0x1200}) builder.symbol(pc, "make_workspace", "leaky.cu", 29, module);
  builder.symbol(0x1300, "load_weights", "leaky.cu", 19, module);
  for (uint64_t pc : {0x1900, 0x1910, 0x1920}) builder.symbol(pc, "main", "leaky.cu", 77, module);
  builder.alloc(1, 0xa000, 100, first);
  builder.alloc(2, 0xb000, 100, second);
  builder.alloc(3, 0xc000, 150, other);
  Report report = analyze(builder);
  ASSERT_EQ(report.leaks.size(), 2u);
  EXPECT_EQ(report.leaks[0].bytes, 200u);
  EXPECT_EQ(report.leaks[0].count, 2u);
  EXPECT_EQ(report.leaks[0].stack.id, first);
  EXPECT_EQ(report.leaks[0].stack_ids, (std::vector<int64_t>{first, second}));
  EXPECT_EQ(report.leaks[1].stack_ids, (std::vector<int64_t>{other}));
}

TEST(ModelTest, UnsymbolizedStacksGroupByPc) {
  TraceBuilder builder;
  int64_t first = builder.stack({0x1100});
  int64_t second = builder.stack({0x1200});
  builder.alloc(1, 0xa000, 100, first);
  builder.alloc(2, 0xb000, 100, second);
  Report report = analyze(builder);
  EXPECT_EQ(report.leaks.size(), 2u);
}

TEST(ModelTest, VmmPhysicalMemoryLivesUntilReleasedAndUnmapped) {
  using schema::EventKind;
  TraceBuilder builder;
  auto vmm = [&](int64_t t, EventKind kind, int64_t address, int64_t size, int64_t handle, int64_t stack = 0) {
    EventRow row;
    row.time_ns = t;
    row.kind = kind;
    row.api = static_cast<int64_t>(Api::cuMemCreate);
    row.memory_kind = static_cast<int64_t>(kind == EventKind::VmmCreate ? MemoryKind::VmmPhysical : MemoryKind::None);
    row.address = address;
    row.size = size;
    row.handle = handle;
    row.stack_id = stack;
    builder.event(row);
  };
  int64_t kept = builder.stack({0x4242});
  vmm(1, EventKind::VmmReserve, 0x700000000, 8 << 20, 0);
  vmm(2, EventKind::VmmCreate, 0, 2 << 20, 11);  // released while mapped ...
  vmm(3, EventKind::VmmMap, 0x700000000, 2 << 20, 11);
  vmm(4, EventKind::VmmCreate, 0, 4 << 20, 12, kept);  // never released: the leak
  vmm(5, EventKind::VmmMap, 0x700200000, 4 << 20, 12);
  vmm(6, EventKind::VmmRelease, 0, 0, 11);               // ... still held by its mapping
  vmm(7, EventKind::VmmUnmap, 0x700000000, 2 << 20, 0);  // now the 2 MiB are freed
  vmm(8, EventKind::VmmAddressFree, 0x700000000, 8 << 20, 0);
  Report report = analyze(builder);
  EXPECT_EQ(report.totals.allocations, 2u);
  EXPECT_EQ(report.totals.frees, 1u);
  EXPECT_EQ(report.totals.peak_bytes, uint64_t{6} << 20);
  EXPECT_EQ(report.totals.peak_time_ns, 4);
  EXPECT_EQ(report.peak_by_kind.vmm_physical, uint64_t{6} << 20);
  EXPECT_EQ(report.totals.leaked_bytes, uint64_t{4} << 20);
  EXPECT_EQ(report.totals.leaked_allocations, 1u);
  ASSERT_EQ(report.leaks.size(), 1u);
  EXPECT_EQ(report.leaks[0].stack.id, kept);
  EXPECT_EQ(report.leaks[0].memory_kinds, (std::vector<MemoryKind>{MemoryKind::VmmPhysical}));
  EXPECT_EQ(report.leaked_by_kind.vmm_physical, uint64_t{4} << 20);
  EXPECT_EQ(report.totals.inconsistencies, 0u);
}

TEST(ModelTest, StaticRuntimeFramesAreCutFromTheTopOfAStack) {
  // With a static cudart the runtime's frames are inside the app binary; the app's call site comes first.
  TraceBuilder builder;
  int64_t module = builder.module("/app", 0x1000, 0x10000);
  int64_t stack = builder.stack({0x1100, 0x1200, 0x1300, 0x1400});
  builder.symbol(0x1100, "cudart::cudaApiMalloc(void**, unsigned long)", "cudart.cpp", 10, module);
  builder.symbol(0x1200, "cudaMalloc", "api.cpp", 20, module);
  builder.symbol(0x1300, "load_weights(unsigned long)", "leaky.cu", 19, module);
  builder.symbol(0x1400, "main", "leaky.cu", 76, module);
  builder.alloc(1, 0xa000, 100, stack);
  Report report = analyze(builder);
  ASSERT_EQ(report.leaks.size(), 1u);
  ASSERT_EQ(report.leaks[0].stack.frames.size(), 2u);
  EXPECT_EQ(report.leaks[0].stack.frames[0].function, "load_weights(unsigned long)");
  EXPECT_EQ(report.leaks[0].stack.frames[1].function, "main");
}

TEST(ModelTest, SchemaVersion1TracesAreStillRead) {
  // Version 1 had no events.handle / events.context columns; the reader accepts older versions.
  test_support::TraceBuilderOptions options;
  options.user_version = 1;
  TraceBuilder builder(options);
  builder.alloc(1, 0xa000, 100);
  builder.alloc(2, 0xb000, 50);
  builder.free(3, 0xa000);
  // The v1 table itself, in place of the current schema's event_rows, event_types and events view.
  builder.exec("CREATE TABLE events_v1 AS SELECT id, time_ns, kind, api, source, memory_kind, thread_id, device, "
               "stream, address, size, stack_id, error FROM events");
  builder.exec("DROP VIEW events; DROP TABLE event_rows; DROP TABLE event_types; "
               "ALTER TABLE events_v1 RENAME TO events");
  Report report = analyze(builder);
  EXPECT_EQ(report.trace.schema_version, 1);
  EXPECT_EQ(report.totals.leaked_bytes, 50u);
  EXPECT_EQ(report.totals.peak_bytes, 150u);
}

}  // namespace gmt::analysis
