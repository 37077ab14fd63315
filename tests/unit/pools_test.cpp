// Stream-ordered pools (analysis/model/pools.h): used bytes exact from the trace's own allocations at every moment, per
// pool (a created pool by its handle, the device's current pool, the graph pool), joined with the driver's sampled
// reserved bytes; and fragmentation inside heaps (analysis/model/heap_fragmentation.h): holes at the peak and at the
// end.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "analysis/model/analyze.h"
#include "analysis/model/report.h"
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

constexpr int64_t kMiB = 1 << 20;
constexpr int64_t kPool = 0x5000;
constexpr int64_t kDefaultHandle = 0x9000;

int64_t code(auto value) { return static_cast<int64_t>(value); }

void pool_alloc(TraceBuilder& builder, int64_t time_ns, int64_t address, int64_t size, Api api, int64_t pool,
                int64_t device = 0) {
  EventRow row;
  row.time_ns = time_ns;
  row.kind = EventKind::Alloc;
  row.api = code(api);
  row.device = device;
  row.address = address;
  row.size = size;
  row.handle = pool;
  builder.event(row);
}

void sample(TraceBuilder& builder, int64_t time_ns, int64_t pool, int64_t device, int64_t reserved, int64_t used) {
  builder.exec("INSERT INTO pool_usage(time_ns, pool, device, reserved_bytes, used_bytes) VALUES (" +
               std::to_string(TraceBuilder::kStartNs + time_ns) + ", " + std::to_string(pool) + ", " +
               std::to_string(device) + ", " + std::to_string(reserved) + ", " + std::to_string(used) + ")");
}

const PoolUsage* find_pool(const Report& report, const std::string& kind, int64_t device = 0) {
  for (const PoolUsage& pool : *report.pools) {
    if (pool.kind == kind && pool.device == device) return &pool;
  }
  return nullptr;
}

// A created pool holds 150 MiB at its peak and 30 MiB at the end; the one sample the driver gave (between the two)
// said nothing of either. The device's current pool holds 8 MiB, sampled under the handle the driver resolved.
void two_pools(TraceBuilder& builder) {
  EventRow create;
  create.time_ns = 5;
  create.kind = EventKind::PoolCreate;
  create.api = code(Api::cudaMemPoolCreate);
  create.address = kPool;
  builder.event(create);
  pool_alloc(builder, 10, 0x10000000, 100 * kMiB, Api::cudaMallocFromPoolAsync, kPool);
  pool_alloc(builder, 15, 0x40000000, 8 * kMiB, Api::cudaMallocAsync, 0);
  sample(builder, 15, kDefaultHandle, 0, 32 * kMiB, 8 * kMiB);
  pool_alloc(builder, 20, 0x20000000, 50 * kMiB, Api::cuMemAllocFromPoolAsync, kPool);
  builder.free(30, 0x10000000, Api::cudaFreeAsync);
  sample(builder, 35, kPool, 0, 160 * kMiB, 0);
  builder.free(40, 0x20000000, Api::cudaFreeAsync);
  pool_alloc(builder, 50, 0x30000000, 30 * kMiB, Api::cudaMallocFromPoolAsync, kPool);
  builder.alloc(60, 0x50000000, 4 * kMiB);  // a cudaMalloc: in no pool
}

// The pool: two samples taken before it grew (32 MiB reserved) and a used peak of 150 MiB. Its reserved peak
// is at least the used peak, said as a lower bound; a pool with no sample is "not sampled" in the text and in the JSON.
TEST(PoolsTest, AReservedPeakIsNeverBelowTheUsedPeakAndIsALowerBound) {
  TraceBuilder builder;
  EventRow create;
  create.time_ns = 5;
  create.kind = EventKind::PoolCreate;
  create.api = code(Api::cudaMemPoolCreate);
  create.address = kPool;
  builder.event(create);
  pool_alloc(builder, 10, 0x10000000, 30 * kMiB, Api::cudaMallocFromPoolAsync, kPool);
  sample(builder, 10, kPool, 0, 32 * kMiB, 30 * kMiB);
  sample(builder, 11, kPool, 0, 32 * kMiB, 30 * kMiB);
  pool_alloc(builder, 20, 0x20000000, 120 * kMiB, Api::cudaMallocFromPoolAsync, kPool);
  pool_alloc(builder, 30, 0x40000000, 8 * kMiB, Api::cudaMallocAsync, 0);  // the current pool: never sampled
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  const PoolUsage* created = find_pool(report, "created");
  ASSERT_NE(created, nullptr);
  EXPECT_EQ(created->peak_used_bytes, uint64_t(150 * kMiB));
  EXPECT_EQ(created->sampled_peak_reserved_bytes, uint64_t(32 * kMiB));
  EXPECT_EQ(created->peak_reserved_bytes, uint64_t(150 * kMiB));
  EXPECT_TRUE(created->peak_reserved_from_used);
  const std::string text = render_text(report);
  EXPECT_NE(text.find("    reserved  sampled 2 times: peak at least 150.00 MiB (the used peak; the samples saw at most "
                      "32.00 MiB), 32.00 MiB at the last sample"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("    reserved  not sampled\n"), std::string::npos) << text;
  const nlohmann::json json = nlohmann::json::parse(render_json(report));
  for (const auto& pool : json["pools"]) {
    EXPECT_EQ(pool["reserved_sampled"], pool["samples"] != 0) << pool.dump();
    EXPECT_GE(pool["peak_reserved_bytes"].get<uint64_t>(),
              pool["samples"] == 0 ? 0 : pool["peak_used_bytes"].get<uint64_t>());
  }
  EXPECT_EQ(json["pools"].size(), 2u);
}

TEST(PoolsTest, UsedBytesAreExactFromTheEventsAtThePeakAndAtTheEndOfTheTrace) {
  TraceBuilder builder;
  two_pools(builder);
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  ASSERT_TRUE(report.pools.has_value());
  ASSERT_EQ(report.pools->size(), 2u);

  const PoolUsage* created = find_pool(report, "created");
  ASSERT_NE(created, nullptr);
  EXPECT_EQ(created->pool, kPool);
  EXPECT_TRUE(created->used_from_events);
  EXPECT_EQ(created->peak_used_bytes, uint64_t(150 * kMiB));
  EXPECT_EQ(created->peak_used_time_ns, 20);
  EXPECT_EQ(created->last_used_bytes, uint64_t(30 * kMiB));  // at the end of the trace, not at the last sample
  EXPECT_EQ(created->allocations, 3u);
  EXPECT_EQ(created->live_allocations, 1u);
  EXPECT_EQ(created->samples, 1u);
  EXPECT_EQ(created->peak_reserved_bytes, uint64_t(160 * kMiB));
  EXPECT_EQ(created->last_sample_time_ns, 35);
  // At the sample, 50 MiB were live in the pool (the 100 MiB freed at 30): 110 MiB reserved but unused.
  EXPECT_EQ(created->max_unused_bytes, uint64_t(110 * kMiB));
  EXPECT_EQ(created->max_unused_time_ns, 35);
  ASSERT_EQ(created->series.size(), 1u);
  EXPECT_EQ(created->series[0].used_bytes, uint64_t(50 * kMiB));

  const PoolUsage* current = find_pool(report, "default");
  ASSERT_NE(current, nullptr);
  EXPECT_EQ(current->pool, kDefaultHandle);  // the sample's handle, joined with the cudaMallocAsync allocations
  EXPECT_EQ(current->peak_used_bytes, uint64_t(8 * kMiB));
  EXPECT_EQ(current->peak_used_time_ns, 15);
  EXPECT_EQ(current->last_used_bytes, uint64_t(8 * kMiB));
  EXPECT_EQ(current->samples, 1u);
  EXPECT_EQ(current->max_unused_bytes, uint64_t(24 * kMiB));
}

TEST(PoolsTest, GraphPoolAndAPoolTheTraceDidNotNameAreKeptApart) {
  TraceBuilder builder;
  pool_alloc(builder, 10, 0x10000000, 6 * kMiB, Api::graphMemAlloc, 0, 1);
  pool_alloc(builder, 11, 0x20000000, 2 * kMiB, Api::graphMemAlloc, 0, 1);
  builder.free(12, 0x10000000, Api::graphMemFree);
  sample(builder, 12, static_cast<int64_t>(schema::kGraphMemoryPool), 1, 8 * kMiB, 8 * kMiB);
  pool_alloc(builder, 20, 0x30000000, kMiB, Api::cudaMallocFromPoolAsync, 0);  // an older trace: no handle
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  ASSERT_TRUE(report.pools.has_value());
  ASSERT_EQ(report.pools->size(), 2u);
  const PoolUsage* graph = find_pool(report, "graph", 1);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(graph->peak_used_bytes, uint64_t(8 * kMiB));
  EXPECT_EQ(graph->last_used_bytes, uint64_t(2 * kMiB));
  EXPECT_EQ(graph->samples, 1u);
  EXPECT_EQ(graph->max_unused_bytes, uint64_t(6 * kMiB));  // the sample's used was the driver's; ours is exact
  const PoolUsage* unnamed = find_pool(report, "unrecorded");
  ASSERT_NE(unnamed, nullptr);
  EXPECT_EQ(unnamed->last_used_bytes, uint64_t(kMiB));
  EXPECT_EQ(unnamed->samples, 0u);
}

TEST(PoolsTest, NoPoolAllocationAndNoTableGiveNoPools) {
  TraceBuilder builder;
  builder.exec("DROP TABLE IF EXISTS pool_usage");
  builder.alloc(10, 0x1000, 64);
  TraceFile trace = builder.open();
  EXPECT_FALSE(analyze_trace(trace).pools.has_value());
}

TEST(PoolsTest, TextAndJsonSayUsedIsExactAndReservedSampled) {
  TraceBuilder builder;
  two_pools(builder);
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  const std::string text = render_text(report, RenderOptions{});
  EXPECT_NE(text.find("  pool 0x5000 on device 0\n"
                      "    used      peak 150.00 MiB at "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("; 30.00 MiB at the end of the trace (1 of 3 allocations live)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("    reserved  sampled 1 time: peak at least 160.00 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("  pool 0x9000 on device 0 (the device's current pool)\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("Fragmentation of device memory"), std::string::npos) << text;
  const nlohmann::json json = nlohmann::json::parse(render_json(report, RenderOptions{}));
  const auto& pools = json["pools"];
  ASSERT_EQ(pools.size(), 2u);
  const auto& created = pools[1];
  EXPECT_EQ(created["pool"], "0x5000");
  EXPECT_EQ(created["kind"], "created");
  EXPECT_EQ(created["peak_used_bytes"], 150 * kMiB);
  EXPECT_EQ(created["end_used_bytes"], 30 * kMiB);
  EXPECT_EQ(created["last_used_bytes"], 30 * kMiB);
  EXPECT_EQ(created["used_from_events"], true);
  EXPECT_EQ(created["reserved_sampled"], true);
  EXPECT_EQ(created["series"][0]["unused_bytes"], 110 * kMiB);
  EXPECT_EQ(json["fragmentation"][0]["measures"], "address_space_layout");
}

// PyTorch's heap: one 64 MiB segment; blocks A, B, C of 16 MiB fill it to 48 MiB (the peak), then B is freed.
TEST(HeapFragmentationTest, HolesAtThePeakOfHeldBytesAndAtTheEnd) {
  constexpr int64_t kSegment = 0x7f0000000000;
  TraceBuilder builder;
  builder.meta(schema::meta::kTensorBlocks, "1");
  auto heap_event = [&](int64_t time_ns, EventKind kind, Api api, int64_t address, int64_t size) {
    EventRow row;
    row.time_ns = time_ns;
    row.kind = kind;
    row.api = code(api);
    row.memory_kind = code(kind == EventKind::SegmentAlloc ? MemoryKind::Device : MemoryKind::TensorBlock);
    row.address = address;
    row.size = size;
    row.source = code(Source::TorchAllocator);
    builder.event(row);
  };
  builder.alloc(10, kSegment, 64 * kMiB);
  heap_event(11, EventKind::SegmentAlloc, Api::torchSegmentAlloc, kSegment, 64 * kMiB);
  for (int i = 0; i < 3; ++i) {
    heap_event(20 + i, EventKind::Alloc, Api::torchBlockAlloc, kSegment + i * 16 * kMiB, 16 * kMiB);
  }
  heap_event(30, EventKind::Free, Api::torchBlockFree, kSegment + 16 * kMiB, 0);
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  ASSERT_EQ(report.heap_fragmentation.size(), 1u);
  const HeapFragmentation& heap = report.heap_fragmentation[0];
  EXPECT_EQ(heap.allocator, "PyTorch's caching allocator");
  EXPECT_EQ(heap.device, 0);
  EXPECT_EQ(heap.peak_held_bytes, uint64_t(48 * kMiB));
  EXPECT_EQ(heap.peak_time_ns, 22);
  EXPECT_EQ(heap.at_peak.reserved_bytes, uint64_t(64 * kMiB));
  EXPECT_EQ(heap.at_peak.free_bytes, uint64_t(16 * kMiB));
  EXPECT_EQ(heap.at_peak.largest_free_bytes, uint64_t(16 * kMiB));
  EXPECT_EQ(heap.at_end.held_bytes, uint64_t(32 * kMiB));
  EXPECT_EQ(heap.at_end.free_bytes, uint64_t(32 * kMiB));
  EXPECT_EQ(heap.at_end.largest_free_bytes, uint64_t(16 * kMiB));  // two holes of 16 MiB: B's and the tail
  const std::string text = render_text(report, RenderOptions{});
  EXPECT_NE(text.find("\nFragmentation inside heaps (free bytes in holes between live blocks; ratio 1 - largest hole / "
                      "free)\n  PyTorch's caching allocator on device 0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("    at the end (32.00 MiB held): 32.00 MiB free in holes of 64.00 MiB reserved in 1 segment, "
                      "largest hole 16.00 MiB (ratio 0.50)\n"),
            std::string::npos)
      << text;
  const nlohmann::json json = nlohmann::json::parse(render_json(report, RenderOptions{}));
  EXPECT_EQ(json["heap_fragmentation"][0]["at_peak"]["free_bytes"], 16 * kMiB);
}

// Two segments: S1 of 64 MiB holds A, B, C of 16 MiB (A and C from one source line, two raw stacks), S2 of 32 MiB
// holds D, which fills it. At the peak (D) S1's 16 MiB tail is pinned by A, B and C; S2 is full and pins nothing.
// B is freed at 2 s and D at 3 s: at the end A and C pin S1's 32 MiB free, and the empty S2 is pinned by nobody.
TEST(HeapFragmentationTest, LiveBlocksPinHolesAndTheHeapOverTime) {
  constexpr int64_t kS1 = 0x7f0000000000;
  constexpr int64_t kS2 = 0x7f1000000000;
  TraceBuilder builder;
  builder.meta(schema::meta::kTensorBlocks, "1");
  const int64_t app = builder.module("/app/train", 0x400000, 0x10000);
  builder.symbol(0x401000, "load", "train.cpp", 7, app);
  builder.symbol(0x401008, "load", "train.cpp", 7, app);
  builder.symbol(0x402000, "keep", "train.cpp", 9, app);
  const int64_t load_a = builder.stack({0x401000});
  const int64_t keep = builder.stack({0x402000});
  const int64_t load_c = builder.stack({0x401008});
  auto heap_event = [&](int64_t time_ns, EventKind kind, Api api, int64_t address, int64_t size, int64_t stack) {
    EventRow row;
    row.time_ns = time_ns;
    row.kind = kind;
    row.api = code(api);
    row.memory_kind = code(kind == EventKind::SegmentAlloc ? MemoryKind::Device : MemoryKind::TensorBlock);
    row.address = address;
    row.size = size;
    row.stack_id = stack;
    row.source = code(Source::TorchAllocator);
    builder.event(row);
  };
  builder.alloc(10, kS1, 64 * kMiB);
  builder.alloc(10, kS2, 32 * kMiB);
  heap_event(11, EventKind::SegmentAlloc, Api::torchSegmentAlloc, kS1, 64 * kMiB, 0);
  heap_event(12, EventKind::SegmentAlloc, Api::torchSegmentAlloc, kS2, 32 * kMiB, 0);
  heap_event(20, EventKind::Alloc, Api::torchBlockAlloc, kS1, 16 * kMiB, load_a);
  heap_event(21, EventKind::Alloc, Api::torchBlockAlloc, kS1 + 16 * kMiB, 16 * kMiB, keep);
  heap_event(22, EventKind::Alloc, Api::torchBlockAlloc, kS1 + 32 * kMiB, 16 * kMiB, load_c);
  heap_event(25, EventKind::Alloc, Api::torchBlockAlloc, kS2, 32 * kMiB, keep);
  heap_event(2'000'000'000, EventKind::Free, Api::torchBlockFree, kS1 + 16 * kMiB, 0, 0);
  heap_event(3'000'000'000, EventKind::Free, Api::torchBlockFree, kS2, 0, 0);
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  ASSERT_EQ(report.heap_fragmentation.size(), 1u);
  const HeapFragmentation& heap = report.heap_fragmentation[0];
  EXPECT_EQ(heap.peak_held_bytes, uint64_t(80 * kMiB));
  EXPECT_EQ(heap.peak_time_ns, 25);
  EXPECT_EQ(heap.at_peak.free_bytes, uint64_t(16 * kMiB));

  ASSERT_EQ(heap.pinned_at_peak.size(), 2u);
  const HeapPinGroup& loads = heap.pinned_at_peak[0];  // same free pinned: more bytes held first
  EXPECT_EQ(loads.stack.id, load_a);
  EXPECT_EQ(loads.stack_ids, (std::vector<int64_t>{load_a, load_c}));
  EXPECT_EQ(loads.blocks, 2u);
  EXPECT_EQ(loads.bytes, uint64_t(32 * kMiB));
  EXPECT_EQ(loads.segments, 1u);
  EXPECT_EQ(loads.free_bytes, uint64_t(16 * kMiB));
  const HeapPinGroup& keeps = heap.pinned_at_peak[1];  // B only: D's segment is full
  EXPECT_EQ(keeps.stack.id, keep);
  EXPECT_EQ(keeps.blocks, 1u);
  EXPECT_EQ(keeps.bytes, uint64_t(16 * kMiB));
  EXPECT_EQ(keeps.free_bytes, uint64_t(16 * kMiB));

  ASSERT_EQ(heap.pinned_at_end.size(), 1u);  // the empty S2 is pinned by nobody
  EXPECT_EQ(heap.pinned_at_end[0].stack_ids, (std::vector<int64_t>{load_a, load_c}));
  EXPECT_EQ(heap.pinned_at_end[0].blocks, 2u);
  EXPECT_EQ(heap.pinned_at_end[0].bytes, uint64_t(32 * kMiB));
  EXPECT_EQ(heap.pinned_at_end[0].free_bytes, uint64_t(32 * kMiB));

  // 5 s in at most 1000 buckets: 1 us doubled to 8.192 ms, 611 buckets. Each the heap at its end.
  EXPECT_EQ(heap.bucket_ns, 8'192'000);
  ASSERT_EQ(heap.over_time.size(), 611u);
  auto expect_bucket = [&](size_t i, int64_t held, int64_t free_bytes, int64_t largest) {
    SCOPED_TRACE(i);
    EXPECT_EQ(heap.over_time[i].time_ns, int64_t(i) * 8'192'000);
    EXPECT_EQ(heap.over_time[i].reserved_bytes, uint64_t(96 * kMiB));
    EXPECT_EQ(heap.over_time[i].held_bytes, uint64_t(held * kMiB));
    EXPECT_EQ(heap.over_time[i].free_bytes, uint64_t(free_bytes * kMiB));
    EXPECT_EQ(heap.over_time[i].largest_free_bytes, uint64_t(largest * kMiB));
  };
  expect_bucket(0, 80, 16, 16);
  expect_bucket(243, 80, 16, 16);
  expect_bucket(244, 64, 32, 16);  // B freed at 2 s
  expect_bucket(365, 64, 32, 16);
  expect_bucket(366, 32, 64, 32);  // D freed at 3 s: S2 is one hole
  expect_bucket(610, 32, 64, 32);

  const std::string text = render_text(report, RenderOptions{});
  EXPECT_NE(text.find("      holes pinned by live blocks (in segments with free bytes), most free first:\n"
                      "        32.00 MiB in 2 blocks pin 16.00 MiB free in 1 segment"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(" at load train.cpp:7 [train]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("    over time (0 to "), std::string::npos) << text;
  EXPECT_NE(text.find("      free in holes  "), std::string::npos) << text;
  EXPECT_NE(text.find("  up to 64.00 MiB at 2.99"), std::string::npos) << text;
  const nlohmann::json json = nlohmann::json::parse(render_json(report, RenderOptions{}));
  const auto& entry = json["heap_fragmentation"][0];
  EXPECT_EQ(entry["pinned_at_peak"][1]["free_bytes"], 16 * kMiB);
  EXPECT_EQ(entry["pinned_at_end"][0]["stack_ids"], (std::vector<int64_t>{load_a, load_c}));
  EXPECT_EQ(entry["pinned_at_end"][0]["user_frame"], "load train.cpp:7 [train]");
  EXPECT_EQ(entry["bucket_ns"], 8'192'000);
  EXPECT_EQ(entry["over_time"].size(), 611u);
  EXPECT_EQ(entry["over_time"][366]["largest_free_bytes"], 32 * kMiB);
}

}  // namespace
}  // namespace gmt::analysis
