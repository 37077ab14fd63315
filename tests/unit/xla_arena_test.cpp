// JAX/XLA's preallocated arena (analysis/model/allocators.h is_xla_arena, docs/analysis.md "JAX/XLA's preallocated
// arena"): the CUDA-level allocations XLA's BFC allocator made and never gave back are cached at exit, not leaked;
// the verdict says nothing about JAX's buffers inside; XLA's buffers allocated one by one stay leaks.
#include <gtest/gtest.h>

#include "analysis/format.h"
#include "analysis/model/allocators.h"
#include "analysis/model/analyze.h"
#include "analysis/model/findings.h"
#include "analysis/model/report.h"
#include "analysis/render/render.h"
#include "trace_builder.h"

namespace gmt::analysis {
namespace {

using test_support::TraceBuilder;

constexpr uint64_t kXla = 0x7e0000000000;   // jaxlib/xla_extension.so
constexpr uint64_t kCuda = 0x7d0000000000;  // libcuda.so.1
constexpr uint64_t kApp = 0x400000;
constexpr int64_t kArenaBytes = int64_t{3} << 30;  // the preallocated 75% of a small GPU
constexpr int64_t kGrowthBytes = int64_t{64} << 20;
constexpr int64_t kAppLeak = 4096;

// Stacks: 1 = XLA's BFC allocator extending its arena; 2 = the app's own cudaMalloc; 3 = XLA's platform allocator
// (named frames, none of the BFC allocator); 4 = XLA's frames without symbols (a stripped plugin).
struct Stacks {
  int64_t bfc = 0, app = 0, platform = 0, stripped = 0;
};

Stacks jax_stacks(TraceBuilder& builder) {
  int64_t xla = builder.module("/venv/lib/python3.12/site-packages/jaxlib/xla_extension.so", kXla, 0x1000000);
  int64_t cuda = builder.module("/usr/lib/x86_64-linux-gnu/libcuda.so.1", kCuda, 0x1000000);
  int64_t app = builder.module("/opt/app/bin/server", kApp, 0x100000);
  builder.symbol(kCuda + 0x10, "cuMemAlloc_v2", std::nullopt, std::nullopt, cuda);
  builder.symbol(kXla + 0x100, "stream_executor::gpu::CudaExecutor::Allocate", std::nullopt, std::nullopt, xla);
  builder.symbol(kXla + 0x200, "tsl::BFCAllocator::Extend", std::nullopt, std::nullopt, xla);
  builder.symbol(kXla + 0x300, "xla::PjRtStreamExecutorClient::BufferFromHostBuffer", std::nullopt, std::nullopt, xla);
  builder.symbol(kApp + 0x10, "load_weights", "server.cpp", 12, app);
  builder.symbol(kXla + 0x900, std::nullopt, std::nullopt, std::nullopt, xla);
  Stacks s;
  s.bfc = builder.stack({kCuda + 0x10, kXla + 0x100, kXla + 0x200, kXla + 0x300});
  s.app = builder.stack({kApp + 0x10});
  s.platform = builder.stack({kCuda + 0x10, kXla + 0x100, kXla + 0x300});
  s.stripped = builder.stack({kCuda + 0x10, kXla + 0x900});
  return s;
}

// A JAX program: the arena (preallocated, then grown once), the app's own 4096 B never freed; `platform_leak`
// bytes XLA's platform allocator left live, `stripped` bytes through unnamed XLA frames.
Report jax_report(TraceBuilder& builder, int64_t platform_leak = 0, int64_t stripped = 0) {
  Stacks s = jax_stacks(builder);
  builder.begin();
  builder.alloc(1'000'000, 0x7f0000000000, kArenaBytes, s.bfc);
  builder.alloc(2'000'000, 0x7f1000000000, kGrowthBytes, s.bfc);
  builder.alloc(3'000'000, 0x1000, kAppLeak, s.app);
  builder.alloc(4'000'000, 0x8000000, 1 << 20, s.platform);  // a temporary buffer, freed
  builder.free(5'000'000, 0x8000000);
  if (platform_leak) builder.alloc(6'000'000, 0x9000000, platform_leak, s.platform);
  if (stripped) builder.alloc(7'000'000, 0xa000000, stripped, s.stripped);
  builder.commit();
  TraceFile trace = builder.open();
  return analyze_trace(trace);
}

TEST(XlaArenaTest, TheArenaIsCachedAtExitNotLeaked) {
  TraceBuilder builder;
  Report report = jax_report(builder);
  const uint64_t arena = uint64_t(kArenaBytes + kGrowthBytes);
  // Device memory stays as counted: the arena is in the peak.
  EXPECT_EQ(report.totals.allocations, 4u);
  EXPECT_EQ(report.totals.peak_bytes, arena + kAppLeak + (1 << 20));
  // Leaked: only the app's own 4096 B; the arena's two allocations moved to cached, to the byte.
  EXPECT_EQ(report.totals.leaked_bytes, uint64_t(kAppLeak));
  EXPECT_EQ(report.totals.leaked_allocations, 1u);
  EXPECT_EQ(report.leaked_by_kind.device, uint64_t(kAppLeak));
  EXPECT_EQ(report.totals.cached_at_exit_bytes, arena);
  EXPECT_EQ(report.totals.cached_at_exit_allocations, 2u);
  ASSERT_EQ(report.leak_groups_total, 1u);
  ASSERT_EQ(report.leaks.size(), 1u);
  EXPECT_EQ(report.leaks[0].bytes, uint64_t(kAppLeak));
  ASSERT_EQ(report.heaps.size(), 1u);
  const HeapAtExit& heap = report.heaps[0];
  EXPECT_EQ(heap.source, kXlaArenaSource);
  EXPECT_EQ(heap.allocator, "JAX/XLA's preallocated arena");
  EXPECT_EQ(heap.reserved_bytes, arena);
  EXPECT_EQ(heap.reserved_allocations, 2u);
  EXPECT_FALSE(heap.blocks_recorded);
  EXPECT_FALSE(heap.in_leaks);
  EXPECT_TRUE(heap.opaque);
  EXPECT_TRUE(heap.cached());
  EXPECT_NE(heap.note.find("XLA_PYTHON_CLIENT_ALLOCATOR=platform"), std::string::npos);
  EXPECT_NE(heap.note.find("XLA_PYTHON_CLIENT_PREALLOCATE=false"), std::string::npos);
  // The arena's buffers are unknown: no clean verdict, but the listed leaks stay exact (the app's 4096 B is a leak).
  EXPECT_FALSE(leak_verdict_complete(report));
  EXPECT_TRUE(listed_leaks_exact(report));
  std::vector<Finding> found = findings_of(report);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].bytes, uint64_t(kAppLeak));
  EXPECT_EQ(found[0].verdict.rfind("leak: ", 0), 0u) << found[0].verdict;
  // The breakdown's leaked bytes leave the arena out too.
  uint64_t breakdown_leaked = 0;
  for (const BreakdownRow& row : report.breakdown.by_thread) breakdown_leaked += row.leaked_bytes;
  EXPECT_EQ(breakdown_leaked, uint64_t(kAppLeak));
  // No allocator section for the arena: it is in no leak group.
  EXPECT_TRUE(name_allocators(report.leaks).empty());

  const std::string text = render_text(report);
  EXPECT_NE(text.find("  leaked              " + format_bytes_exact(kAppLeak) + " in 1 allocation\n"),
            std::string::npos)
      << text;
  const std::string cached_line = "  cached at exit      " + format_bytes_exact(arena) +
                                  " in 2 allocations by JAX/XLA's preallocated arena (not a leak; no verdict on "
                                  "JAX's buffers in it: per-buffer truth needs XLA_PYTHON_CLIENT_ALLOCATOR=platform";
  EXPECT_NE(text.find(cached_line), std::string::npos) << text;
  const std::string json = render_json(report);
  EXPECT_NE(json.find("\"source\": \"xla_arena\""), std::string::npos);
  EXPECT_NE(json.find("\"opaque\": true"), std::string::npos);
  EXPECT_NE(json.find("\"verdict_complete\": false"), std::string::npos);
  EXPECT_NE(json.find("\"listed_leaks_exact\": true"), std::string::npos);
}

TEST(XlaArenaTest, WithNothingElseLiveTheVerdictIsNoneOnJaxBuffers) {
  TraceBuilder builder;
  Stacks s = jax_stacks(builder);
  builder.begin();
  builder.alloc(1'000'000, 0x7f0000000000, kArenaBytes, s.bfc);
  builder.alloc(3'000'000, 0x1000, kAppLeak, s.app);
  builder.free(4'000'000, 0x1000);
  builder.commit();
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  EXPECT_EQ(report.totals.leaked_allocations, 0u);
  EXPECT_EQ(report.totals.cached_at_exit_bytes, uint64_t(kArenaBytes));
  EXPECT_EQ(no_leaks_sentence(report),
            "no leaks outside JAX/XLA's preallocated arena; no verdict on JAX's buffers in it");
  const std::string text = render_text(report);
  EXPECT_NE(text.find("\nNo leaks outside JAX/XLA's preallocated arena; no verdict on JAX's buffers in it.\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("No leaks:"), std::string::npos) << text;
}

TEST(XlaArenaTest, PlatformAllocatorBuffersStayLeaksAndStrippedXlaIsTheArena) {
  TraceBuilder builder;
  Report report = jax_report(builder, 5 << 20, 7 << 20);
  const uint64_t arena = uint64_t(kArenaBytes + kGrowthBytes + (7 << 20));
  EXPECT_EQ(report.totals.leaked_bytes, uint64_t(kAppLeak + (5 << 20)));
  EXPECT_EQ(report.totals.leaked_allocations, 2u);
  EXPECT_EQ(report.totals.cached_at_exit_bytes, arena);
  EXPECT_EQ(report.totals.cached_at_exit_allocations, 3u);
  std::vector<AllocatorFinding> named = name_allocators(report.leaks);
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].id, "jax_xla");
  EXPECT_EQ(named[0].leaked_bytes, uint64_t(5 << 20));
}

TEST(XlaArenaTest, SuppressedAndMinBytesAreNotMovedTwice) {
  // Groups below --min-bytes still count in the totals: the arena is taken before that cut.
  TraceBuilder builder;
  Stacks s = jax_stacks(builder);
  builder.begin();
  builder.alloc(1'000'000, 0x7f0000000000, 1000, s.bfc);
  builder.alloc(3'000'000, 0x1000, kAppLeak, s.app);
  builder.commit();
  TraceFile trace = builder.open();
  AnalyzeOptions options;
  options.min_bytes = 1 << 20;
  Report report = analyze_trace(trace, options);
  EXPECT_EQ(report.totals.leaked_bytes, uint64_t(kAppLeak));
  EXPECT_EQ(report.totals.cached_at_exit_bytes, 1000u);
  EXPECT_EQ(report.leak_groups_total, 1u);
  EXPECT_EQ(report.leak_groups_below_min_bytes, 1u);
}

}  // namespace
}  // namespace gmt::analysis
