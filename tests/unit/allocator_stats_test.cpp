// A framework allocator's own statistics (allocator_stats, schema v6) on handmade traces: the figures per
// device, the cache at the end, the fragmentation advice rule at its edges, PyTorch OOMs joined to the
// CUDA-level failure and to the memory live then, older traces without the table, and the diff.
#include <gtest/gtest.h>

#include <optional>

#include "analysis/model/analyze.h"
#include "analysis/model/diff.h"
#include "analysis/model/report.h"
#include "analysis/render/render.h"
#include "trace_builder.h"

namespace gmt::analysis {
namespace {

using schema::FrameworkAllocator;
using schema::SampleTrigger;
using test_support::TraceBuilder;

constexpr int64_t kMiB = 1 << 20;
constexpr int64_t kMs = 1'000'000;

struct Row {
  int64_t time_ns;
  int64_t device;
  FrameworkAllocator allocator;
  SampleTrigger trigger;
  int64_t in_use;
  int64_t reserved;
  std::optional<int64_t> inactive_split;
  std::optional<int64_t> retries;
  std::optional<int64_t> ooms;
  std::optional<int64_t> request;
};

std::string sql_value(const std::optional<int64_t>& value) { return value ? std::to_string(*value) : "NULL"; }

void add(TraceBuilder& builder, const Row& r) {
  builder.exec("INSERT INTO allocator_stats VALUES (" + std::to_string(TraceBuilder::kStartNs + r.time_ns) + ", " +
               std::to_string(r.device) + ", " + std::to_string(static_cast<int>(r.allocator)) + ", " +
               std::to_string(static_cast<int>(r.trigger)) + ", " + std::to_string(r.in_use) + ", " +
               std::to_string(r.reserved) + ", " + sql_value(r.inactive_split) + ", " + sql_value(r.retries) + ", " +
               sql_value(r.ooms) + ", " + sql_value(r.request) + ")");
}

Report analyze(TraceBuilder& builder) {
  TraceFile file = builder.open();
  return analyze_trace(file);
}

TEST(AllocatorStatsTest, FiguresPerDeviceAndTheCacheAtTheEnd) {
  TraceBuilder b;
  const auto caching = FrameworkAllocator::TorchCaching;
  add(b, {10 * kMs, 0, caching, SampleTrigger::Cadence, 10 * kMiB, 20 * kMiB, 1 * kMiB, 0, 0, std::nullopt});
  add(b, {20 * kMs, 0, caching, SampleTrigger::RangeEnd, 30 * kMiB, 64 * kMiB, 8 * kMiB, 1, 0, std::nullopt});
  add(b, {30 * kMs, 0, caching, SampleTrigger::Cadence, 25 * kMiB, 80 * kMiB, 4 * kMiB, 2, 0, std::nullopt});
  add(b, {40 * kMs, 0, caching, SampleTrigger::Exit, 5 * kMiB, 70 * kMiB, 2 * kMiB, 2, 0, std::nullopt});
  add(b, {15 * kMs, 1, FrameworkAllocator::CupyPool, SampleTrigger::Cadence, 3 * kMiB, 9 * kMiB, std::nullopt,
          std::nullopt, std::nullopt, std::nullopt});
  Report report = analyze(b);
  ASSERT_TRUE(report.allocator_stats);
  EXPECT_EQ(report.allocator_stats->samples, 5u);
  ASSERT_EQ(report.allocator_stats->devices.size(), 2u);
  const AllocatorDevice& torch = report.allocator_stats->devices[0];
  EXPECT_EQ(torch.device, 0);
  EXPECT_EQ(torch.allocator_id, "pytorch_caching");
  EXPECT_EQ(torch.samples, 4u);
  EXPECT_EQ(torch.samples_by_trigger[static_cast<int>(SampleTrigger::Cadence)], 2u);
  EXPECT_EQ(torch.samples_by_trigger[static_cast<int>(SampleTrigger::RangeEnd)], 1u);
  EXPECT_EQ(torch.samples_by_trigger[static_cast<int>(SampleTrigger::Exit)], 1u);
  EXPECT_EQ(torch.peak_in_use_bytes, uint64_t(30 * kMiB));
  EXPECT_EQ(torch.peak_in_use_time_ns, 20 * kMs);
  EXPECT_EQ(torch.peak_reserved_bytes, uint64_t(80 * kMiB));
  EXPECT_EQ(torch.peak_reserved_time_ns, 30 * kMs);
  EXPECT_EQ(torch.peak_cached_bytes, uint64_t(65 * kMiB));  // 70 - 5 at exit
  EXPECT_EQ(torch.peak_inactive_split_bytes, std::optional<uint64_t>(8 * kMiB));
  EXPECT_EQ(torch.reserved_at_peak_inactive_split_bytes, uint64_t(64 * kMiB));
  EXPECT_EQ(torch.alloc_retries, std::optional<uint64_t>(2));
  EXPECT_EQ(torch.ooms, std::optional<uint64_t>(0));
  EXPECT_EQ(torch.cached_at_end_bytes, uint64_t(65 * kMiB));
  EXPECT_FALSE(torch.fragmented);  // 8 MiB is below the 32 MiB floor
  EXPECT_TRUE(torch.advice.empty());
  ASSERT_EQ(torch.series.size(), 4u);
  EXPECT_EQ(torch.series[1].trigger, SampleTrigger::RangeEnd);

  const AllocatorDevice& cupy = report.allocator_stats->devices[1];
  EXPECT_EQ(cupy.allocator_id, "cupy_pool");
  EXPECT_FALSE(cupy.peak_inactive_split_bytes);
  EXPECT_FALSE(cupy.alloc_retries);
  EXPECT_EQ(cupy.cached_at_end_bytes, uint64_t(6 * kMiB));

  const std::string text = render_text(report);
  EXPECT_NE(text.find("PyTorch caching allocator on device 0: 4 samples (2 periodic, 1 at NVTX range ends, 1 at exit)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("65.00 MiB is PyTorch's cache of freed blocks, not a leak"), std::string::npos) << text;
  EXPECT_NE(text.find("6.00 MiB is CuPy's pool of freed blocks, not a leak"), std::string::npos) << text;
  EXPECT_EQ(text.find("advice:"), std::string::npos) << text;
}

// The rule: default PyTorch allocator, inactive split at least 32 MiB and > 25% of the reserved bytes at the
// sample where it peaked, or at least 256 MiB and 5% of them.
TEST(AllocatorStatsTest, FragmentationAdviceRule) {
  struct Case {
    FrameworkAllocator allocator;
    int64_t split;
    int64_t reserved;
    bool advised;
  };
  const Case cases[] = {
      {FrameworkAllocator::TorchCaching, 201 * kMiB, 800 * kMiB, true},       // just above 25%
      {FrameworkAllocator::TorchCaching, 200 * kMiB, 800 * kMiB, false},      // exactly 25%, under 256 MiB
      {FrameworkAllocator::TorchCaching, 31 * kMiB, 64 * kMiB, false},        // 48%, but under 32 MiB
      {FrameworkAllocator::TorchCaching, 256 * kMiB, 5120 * kMiB, true},      // 256 MiB and 5%: large enough
      {FrameworkAllocator::TorchCaching, 255 * kMiB, 5100 * kMiB, false},     // 5%, but under 256 MiB
      {FrameworkAllocator::TorchCaching, 300 * kMiB, 8192 * kMiB, false},     // 300 MiB, but under 5%
      {FrameworkAllocator::TorchExpandable, 600 * kMiB, 1024 * kMiB, false},  // already expandable
  };
  for (const Case& c : cases) {
    TraceBuilder b;
    add(b, {10 * kMs, 0, c.allocator, SampleTrigger::Cadence, kMiB, c.reserved, c.split, 0, 0, std::nullopt});
    // A later sample with more reserved and less split: the share is taken at the split's own peak.
    add(b, {20 * kMs, 0, c.allocator, SampleTrigger::Cadence, kMiB, 4 * c.reserved, 0, 0, 0, std::nullopt});
    Report report = analyze(b);
    const AllocatorDevice& d = report.allocator_stats->devices.at(0);
    EXPECT_EQ(d.fragmented, c.advised) << c.split << " of " << c.reserved;
    EXPECT_EQ(d.advice.find("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True") != std::string::npos, c.advised);
  }
}

TEST(AllocatorStatsTest, OomJoinsTheCudaFailureAndTheLiveMemory) {
  TraceBuilder b;
  b.symbol(0x1000, "load_model", "model.cpp", 12);
  b.symbol(0x2000, "activations", "model.cpp", 40);
  const int64_t model = b.stack({0x1000});
  const int64_t acts = b.stack({0x2000});
  b.alloc(1 * kMs, 0x10000000, 40 * kMiB, model);
  b.alloc(2 * kMs, 0x20000000, 20 * kMiB, acts);
  b.alloc(3 * kMs, 0x30000000, 5 * kMiB, acts, schema::Api::cudaMalloc, schema::MemoryKind::Device, 1);  // device 1
  b.free(4 * kMs, 0x20000000);
  const int64_t failed = b.alloc_failed(5 * kMs, 100 * kMiB, 2, acts, 7 * kMiB, 80 * kMiB);
  b.alloc(7 * kMs, 0x40000000, 1 * kMiB, acts);  // after the OOM: not live at it
  add(b, {6 * kMs, 0, FrameworkAllocator::TorchCaching, SampleTrigger::Oom, 38 * kMiB, 40 * kMiB, 2 * kMiB, 1, 1,
          100 * kMiB});
  // An OOM with no CUDA-level failure on its device (a memory fraction limit).
  add(b, {8 * kMs, 1, FrameworkAllocator::TorchCaching, SampleTrigger::Oom, 4 * kMiB, 5 * kMiB, 0, 0, 1, 3 * kMiB});
  Report report = analyze(b);
  ASSERT_EQ(report.allocator_stats->ooms.size(), 2u);
  const AllocatorOom& oom = report.allocator_stats->ooms[0];
  EXPECT_EQ(oom.device, 0);
  EXPECT_EQ(oom.time_ns, 6 * kMs);
  EXPECT_EQ(oom.sample.request_bytes, std::optional<uint64_t>(100 * kMiB));
  EXPECT_EQ(oom.cuda_failure_event_id, std::optional<int64_t>(failed));
  EXPECT_EQ(oom.device_free_bytes, std::optional<int64_t>(7 * kMiB));
  EXPECT_EQ(oom.device_total_bytes, std::optional<int64_t>(80 * kMiB));
  EXPECT_EQ(oom.cuda_live_bytes, uint64_t(40 * kMiB));  // device 0 only, the freed block and the later one left out
  ASSERT_EQ(oom.top_stacks.size(), 1u);
  EXPECT_EQ(oom.top_stacks[0].bytes, uint64_t(40 * kMiB));
  EXPECT_EQ(oom.top_stacks[0].stack.frames.at(0).function, std::optional<std::string>("load_model"));

  const AllocatorOom& limited = report.allocator_stats->ooms[1];
  EXPECT_FALSE(limited.cuda_failure_event_id);
  EXPECT_FALSE(limited.device_free_bytes);
  EXPECT_EQ(limited.cuda_live_bytes, uint64_t(5 * kMiB));

  const std::string text = render_text(report);
  EXPECT_NE(text.find("PyTorch out of memory (2)"), std::string::npos) << text;
  EXPECT_NE(text.find("request 100.00 MiB (104857600 B)"), std::string::npos) << text;
  EXPECT_NE(text.find("device free: 7.00 MiB (7340032 B) of 80.00 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("at load_model model.cpp:12"), std::string::npos) << text;
  EXPECT_NE(text.find("device free: unknown (no CUDA-level allocation failed"), std::string::npos) << text;
}

TEST(AllocatorStatsTest, OlderTracesHaveNone) {
  TraceBuilder b;
  b.exec("DROP TABLE allocator_stats");
  b.alloc(1 * kMs, 0x1000, 100);
  Report report = analyze(b);
  EXPECT_FALSE(report.allocator_stats);
  EXPECT_NE(render_json(report).find("\"allocator_stats\": null"), std::string::npos);
  EXPECT_EQ(render_text(report).find("Framework allocator statistics"), std::string::npos);
}

TEST(AllocatorStatsTest, UnknownCodesAreSkipped) {
  TraceBuilder b;
  b.exec("INSERT INTO allocator_stats VALUES (1, 0, 99, 1, 10, 20, NULL, NULL, NULL, NULL)");
  b.exec("INSERT INTO allocator_stats VALUES (1, 0, 1, 0, 10, 20, NULL, NULL, NULL, NULL)");
  Report report = analyze(b);
  ASSERT_TRUE(report.allocator_stats);
  EXPECT_EQ(report.allocator_stats->samples, 0u);
  EXPECT_TRUE(report.allocator_stats->devices.empty());
}

TEST(AllocatorStatsTest, DiffShowsBothRunsFigures) {
  TraceBuilder base, next;
  add(base, {10 * kMs, 0, FrameworkAllocator::TorchCaching, SampleTrigger::Cadence, kMiB, 1024 * kMiB, 300 * kMiB, 7, 0,
             std::nullopt});
  add(next, {10 * kMs, 0, FrameworkAllocator::TorchExpandable, SampleTrigger::Cadence, kMiB, 900 * kMiB, 20 * kMiB, 0,
             0, std::nullopt});
  Report a = analyze(base), b = analyze(next);
  TraceDiff diff = diff_reports(a, b, {});
  ASSERT_EQ(diff.allocators.size(), 1u);
  const AllocatorDiff& entry = diff.allocators[0];
  ASSERT_TRUE(entry.base && entry.next);
  EXPECT_EQ(entry.base->allocator, "PyTorch caching allocator");
  EXPECT_EQ(entry.next->allocator, "PyTorch caching allocator, expandable segments");
  EXPECT_EQ(entry.base->peak_inactive_split_bytes, std::optional<uint64_t>(300 * kMiB));
  EXPECT_EQ(entry.next->peak_inactive_split_bytes, std::optional<uint64_t>(20 * kMiB));
  EXPECT_EQ(entry.base->peak_reserved_bytes, uint64_t(1024 * kMiB));
  EXPECT_EQ(entry.next->peak_reserved_bytes, uint64_t(900 * kMiB));
  EXPECT_TRUE(diff.regressions.empty());
  const std::string text = render_diff_text(diff);
  EXPECT_NE(text.find("device 0: base PyTorch caching allocator, new PyTorch caching allocator, expandable segments"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("-280.00 MiB"), std::string::npos) << text;
  EXPECT_NE(render_diff_json(diff).find("\"peak_inactive_split_bytes\": 20971520"), std::string::npos);
}

}  // namespace
}  // namespace gmt::analysis
