// Framework heaps (analysis/model/heaps.h): where a heap's segments and blocks are recorded, "leaked" is what the app
// held (live blocks, and CUDA-level memory backing no heap), the CUDA-level memory backing a segment is cached at exit;
// growth, ranges and the peaks' holders are at block level; a block allocation that failed is labelled from its
// heap's layout; a heap whose blocks were not all recorded keeps the verdict from being clean.
#include <gtest/gtest.h>

#include "analysis/model/analyze.h"
#include "analysis/model/ranges.h"
#include "analysis/model/report.h"
#include "analysis/model/tensor_blocks.h"
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

constexpr int64_t kSegment = 0x7f0000000000;
constexpr int64_t kSegmentBytes = 256 << 20;
constexpr int64_t kKept = 2 << 20;
constexpr int64_t kTemp = 1 << 20;
constexpr int64_t kMiB = 1 << 20;

int64_t code(auto value) { return static_cast<int64_t>(value); }

// A heap's event as the recorders write it (PyTorch's bridge; the NVTX memory API's with Source::NvtxMemory).
void heap_event(TraceBuilder& builder, int64_t time_ns, EventKind kind, Api api, int64_t address, int64_t size,
                int64_t stack_id = 0, Source source = Source::TorchAllocator, int64_t error = 0) {
  const MemoryKind block = source == Source::TorchAllocator ? MemoryKind::TensorBlock : MemoryKind::HeapBlock;
  EventRow row;
  row.time_ns = time_ns;
  row.kind = kind;
  row.api = code(api);
  row.memory_kind = code(block);
  row.address = address;
  row.size = size;
  row.stack_id = stack_id;
  row.error = error;
  row.source = code(source);
  builder.event(row);
}
void block(TraceBuilder& builder, int64_t time_ns, bool alloc, int64_t address, int64_t size, int64_t stack_id = 0) {
  heap_event(builder, time_ns, alloc ? EventKind::Alloc : EventKind::Free,
             alloc ? Api::torchBlockAlloc : Api::torchBlockFree, address, alloc ? size : 0, stack_id);
}
void segment(TraceBuilder& builder, int64_t time_ns, int64_t address, int64_t size, Api api = Api::torchSegmentAlloc) {
  heap_event(builder, time_ns, EventKind::SegmentAlloc, api, address, size);
}

// Python stacks: 1 = kept activation (train.py:42 in Model.forward), 2 = a temporary (train.py:50).
void python_stacks(TraceBuilder& builder) {
  builder.exec("INSERT INTO strings(id, text) VALUES (100, '/src/train.py'), (101, 'Model.forward'), "
               "(102, '<module>'), (105, 'scratch')");
  builder.exec("INSERT INTO python_frames(id, file_id, function_id, line) VALUES (2, 100, 101, 42), (3, 100, 102, 90), "
               "(4, 100, 105, 50)");
  builder.exec("INSERT INTO stacks(id, depth) VALUES (1, 2), (2, 2)");
  builder.exec("INSERT INTO stack_frames(stack_id, level, pc, python_frame_id) VALUES (1, 0, 0, 2), (1, 1, 0, 3), "
               "(2, 0, 0, 4), (2, 1, 0, 3)");
}

// A training loop of `steps` steps of 10 ms in NVTX ranges "step": PyTorch cudaMallocs one 256 MiB segment, each
// step allocates three 1 MiB temporaries and frees them, and keeps one 2 MiB block when `keep`. The app also
// cudaMallocs 4096 B itself and never frees them (a CUDA-level leak outside any heap).
void training_trace(TraceBuilder& builder, int steps, bool keep) {
  builder.meta(schema::meta::kEventsTimeOrdered, "1");
  builder.meta(schema::meta::kTensorBlocks, "1");
  python_stacks(builder);
  builder.begin();
  builder.alloc(1'000'000, kSegment, kSegmentBytes);
  segment(builder, 1'000'100, kSegment, kSegmentBytes);
  builder.alloc(1'500'000, 0x1000, 4096);
  int64_t next_kept = kSegment + (64 << 20);
  for (int step = 0; step < steps; ++step) {
    const int64_t t = 2'000'000 + step * 10'000'000;
    builder.range("step", t, t + 9'000'000, 0, 1000);
    for (int i = 0; i < 3; ++i) block(builder, t + 1000 + i * 1000, true, kSegment + i * kTemp, kTemp, 2);
    for (int i = 0; i < 3; ++i) block(builder, t + 5000 + i * 1000, false, kSegment + i * kTemp, 0);
    if (keep) {
      block(builder, t + 8000, true, next_kept, kKept, 1);
      next_kept += kKept;
    }
  }
  builder.commit();
}

TEST(HeapsTest, LeakedIsWhatTheAppHeldAndTheSegmentIsCachedAtExit) {
  TraceBuilder builder;
  training_trace(builder, 50, true);
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  // Device memory stays CUDA-level: the segment and the app's own 4096 B.
  EXPECT_EQ(report.totals.allocations, 2u);
  EXPECT_EQ(report.totals.peak_bytes, uint64_t(kSegmentBytes + 4096));
  EXPECT_EQ(report.totals.inconsistencies, 0u);
  EXPECT_EQ(report.totals.unmatched_frees, 0u);
  // Leaked: the 50 kept blocks and the 4096 B; the segment is cached by PyTorch, apart.
  EXPECT_EQ(report.totals.leaked_bytes, uint64_t(50 * kKept + 4096));
  EXPECT_EQ(report.totals.leaked_allocations, 51u);
  EXPECT_EQ(report.totals.cached_at_exit_bytes, uint64_t(kSegmentBytes));
  EXPECT_EQ(report.totals.cached_at_exit_allocations, 1u);
  ASSERT_EQ(report.heaps.size(), 1u);
  const HeapAtExit& heap = report.heaps[0];
  EXPECT_EQ(heap.allocator, "PyTorch's caching allocator");
  EXPECT_TRUE(heap.cached());
  EXPECT_EQ(heap.reserved_bytes, uint64_t(kSegmentBytes));
  EXPECT_EQ(heap.segments, 1u);
  EXPECT_EQ(heap.segment_bytes, uint64_t(kSegmentBytes));
  EXPECT_EQ(heap.held_bytes, uint64_t(50 * kKept));
  EXPECT_EQ(heap.held_blocks, 50u);
  EXPECT_TRUE(leak_verdict_complete(report));
  // Leak groups: the kept blocks at their Python line, then the app's cudaMalloc.
  ASSERT_EQ(report.leak_groups_total, 2u);
  ASSERT_EQ(report.leaks.size(), 2u);
  EXPECT_EQ(report.leaks[0].bytes, uint64_t(50 * kKept));
  EXPECT_EQ(report.leaks[0].count, 50u);
  EXPECT_EQ(python_line(report.leaks[0].stack), "/src/train.py:Model.forward:42");
  EXPECT_EQ(report.leaks[0].memory_kinds, std::vector<MemoryKind>{MemoryKind::TensorBlock});
  EXPECT_EQ(report.leaks[1].bytes, 4096u);
  EXPECT_EQ(report.leaks[1].apis, std::vector<Api>{Api::cudaMalloc});
  EXPECT_EQ(report.leaked_by_kind.device, uint64_t(50 * kKept + 4096));

  const std::string text = render_text(report);
  EXPECT_NE(text.find("leaked              100.00 MiB (104861696 B) in 51 allocations"), std::string::npos) << text;
  EXPECT_NE(text.find("cached at exit      256.00 MiB (268435456 B) in 1 allocation by PyTorch's caching allocator "
                      "(its reservation, not a leak)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("No leaks"), std::string::npos) << text;
  const std::string json = render_json(report);
  EXPECT_NE(json.find("\"cached_at_exit_bytes\": 268435456"), std::string::npos);
  EXPECT_NE(json.find("\"leaked_bytes\": 104861696"), std::string::npos);
}

TEST(HeapsTest, GrowthRangesAndThePeaksHoldersAreAtBlockLevel) {
  TraceBuilder builder;
  training_trace(builder, 50, true);
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  ASSERT_EQ(report.growth.findings.size(), 1u);
  ASSERT_FALSE(report.growth.findings[0].stacks.empty());
  EXPECT_EQ(python_line(report.growth.findings[0].stacks[0].stack), "/src/train.py:Model.forward:42");
  ASSERT_EQ(report.ranges.growth.size(), 1u);
  EXPECT_EQ(report.ranges.growth[0].name, "step");
  EXPECT_NEAR(report.ranges.growth[0].bytes_per_iteration, kKept, 1.0);
  ASSERT_FALSE(report.ranges.growth[0].stacks.empty());
  EXPECT_EQ(python_line(report.ranges.growth[0].stacks[0].stack), "/src/train.py:Model.forward:42");
  // The range's allocations are the blocks made in it: 4 per step.
  const RangeStats* step = nullptr;
  for (const RangeStats& range : report.ranges.by_name) {
    if (range.name == "step") step = &range;
  }
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->allocations, 200u);
  EXPECT_EQ(step->live_bytes, uint64_t(50 * kKept));
  // The peak's bytes are the device's; its holders are the app's, at the app's own peak (the last step).
  ASSERT_EQ(report.peaks.size(), 1u);
  EXPECT_EQ(report.peaks[0].bytes, uint64_t(kSegmentBytes + 4096));
  ASSERT_TRUE(report.peaks[0].held_bytes);
  EXPECT_EQ(*report.peaks[0].held_bytes, uint64_t(49 * kKept + 3 * kTemp + 4096));
  ASSERT_FALSE(report.peaks[0].stacks.empty());
  EXPECT_EQ(python_line(report.peaks[0].stacks[0].stack), "/src/train.py:Model.forward:42");
  EXPECT_EQ(report.peaks[0].stacks[0].bytes, uint64_t(49 * kKept));
}

TEST(HeapsTest, AppThatFreedEverythingHasNoLeakAndNoGrowth) {
  TraceBuilder builder;
  training_trace(builder, 50, false);
  builder.free(4'000'000'000, 0x1000);
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  EXPECT_EQ(report.totals.leaked_bytes, 0u);
  EXPECT_EQ(report.totals.leaked_allocations, 0u);
  EXPECT_TRUE(report.leaks.empty());
  EXPECT_EQ(report.totals.cached_at_exit_bytes, uint64_t(kSegmentBytes));
  EXPECT_TRUE(report.growth.findings.empty());
  EXPECT_TRUE(report.ranges.growth.empty());
  const std::string text = render_text(report);
  EXPECT_NE(text.find("No leaks: the app freed everything it allocated (256.00 MiB cached"), std::string::npos) << text;
}

TEST(HeapsTest, DroppedEventsKeepTheVerdictFromBeingClean) {
  TraceBuilder builder;
  training_trace(builder, 20, false);
  builder.free(4'000'000'000, 0x1000);
  builder.meta(schema::meta::kDroppedEvents, "5");
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  EXPECT_EQ(report.totals.leaked_bytes, 0u);
  EXPECT_EQ(report.totals.cached_at_exit_bytes, 0u);  // not cached cleanly: the blocks in it are not all known
  ASSERT_EQ(report.heaps.size(), 1u);
  EXPECT_FALSE(report.heaps[0].blocks_recorded);
  EXPECT_FALSE(report.heaps[0].in_leaks);
  EXPECT_EQ(report.heaps[0].reserved_bytes, uint64_t(kSegmentBytes));
  EXPECT_EQ(report.heaps[0].note, "5 events were lost while recording");
  EXPECT_FALSE(leak_verdict_complete(report));
  const std::string text = render_text(report);
  EXPECT_EQ(text.find("No leaks"), std::string::npos) << text;
  EXPECT_NE(text.find("reserved at exit    256.00 MiB (268435456 B) in 1 allocation by PyTorch's caching allocator, "
                      "blocks not recorded (5 events were lost while recording)"),
            std::string::npos)
      << text;
  EXPECT_NE(render_json(report).find("\"verdict_complete\": false"), std::string::npos);
}

TEST(HeapsTest, WithoutTheBridgePyTorchsSegmentsStayInTheLeaksAndSaySo) {
  TraceBuilder builder;
  builder.meta(schema::meta::kTensorBlocks, "0");
  builder.meta(schema::meta::kTensorBlocksNote, "no C++ compiler (CXX)");
  builder.module("/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so", 0x500000, 0x100000);
  int64_t stack = builder.stack({0x500100});
  builder.alloc(1'000'000, kSegment, kSegmentBytes, stack);
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  EXPECT_EQ(report.totals.leaked_bytes, uint64_t(kSegmentBytes));
  EXPECT_EQ(report.totals.cached_at_exit_bytes, 0u);
  ASSERT_EQ(report.heaps.size(), 1u);
  EXPECT_TRUE(report.heaps[0].in_leaks);
  EXPECT_FALSE(report.heaps[0].blocks_recorded);
  EXPECT_EQ(report.heaps[0].reserved_bytes, uint64_t(kSegmentBytes));
  EXPECT_EQ(report.heaps[0].reserved_allocations, 1u);
  const std::string text = render_text(report);
  EXPECT_NE(text.find("reserved at exit    256.00 MiB (268435456 B) in 1 allocation by PyTorch's caching allocator, "
                      "blocks not recorded (no C++ compiler (CXX)): counted as leaked above"),
            std::string::npos)
      << text;
}

TEST(HeapsTest, VmmHandlesMappedUnderAnExpandableSegmentAreCached) {
  TraceBuilder builder;
  builder.meta(schema::meta::kTensorBlocks, "1");
  builder.meta(schema::meta::kEventsTimeOrdered, "1");
  builder.begin();
  builder.event(
      {100, EventKind::VmmCreate, code(Api::cuMemCreate), code(MemoryKind::VmmPhysical), 0, 0, 2 * kMiB, 0, 0, 11});
  builder.event(
      {200, EventKind::VmmCreate, code(Api::cuMemCreate), code(MemoryKind::VmmPhysical), 0, 0, 2 * kMiB, 0, 0, 12});
  builder.event(
      {300, EventKind::VmmMap, code(Api::cuMemMap), code(MemoryKind::VmmPhysical), 0, kSegment, 2 * kMiB, 0, 0, 11});
  builder.event({400, EventKind::VmmMap, code(Api::cuMemMap), code(MemoryKind::VmmPhysical), 0, kSegment + 2 * kMiB,
                 2 * kMiB, 0, 0, 12});
  segment(builder, 500, kSegment, 4 * kMiB, Api::torchSegmentMap);
  block(builder, 600, true, kSegment + kMiB, 2 * kMiB);
  builder.commit();
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  EXPECT_EQ(report.totals.peak_bytes, uint64_t(4 * kMiB));
  EXPECT_EQ(report.totals.leaked_bytes, uint64_t(2 * kMiB));
  EXPECT_EQ(report.totals.leaked_allocations, 1u);
  EXPECT_EQ(report.totals.cached_at_exit_bytes, uint64_t(4 * kMiB));
  EXPECT_EQ(report.totals.cached_at_exit_allocations, 2u);
  EXPECT_EQ(report.totals.unmatched_frees, 0u);
}

TEST(HeapsTest, AnNvtxMemoryHeapIsAHeapLikePyTorchs) {
  TraceBuilder builder;
  builder.meta(schema::meta::kEventsTimeOrdered, "1");
  builder.begin();
  builder.alloc(100, kSegment, 64 * kMiB);
  heap_event(builder, 200, EventKind::SegmentAlloc, Api::nvtxMemHeapRegister, kSegment, 64 * kMiB, 0,
             Source::NvtxMemory);
  heap_event(builder, 300, EventKind::Alloc, Api::nvtxMemRegionsRegister, kSegment, 3 * kMiB, 0, Source::NvtxMemory);
  heap_event(builder, 400, EventKind::Alloc, Api::nvtxMemRegionsRegister, kSegment + 3 * kMiB, kMiB, 0,
             Source::NvtxMemory);
  heap_event(builder, 500, EventKind::Free, Api::nvtxMemRegionsUnregister, kSegment, 0, 0, Source::NvtxMemory);
  builder.commit();
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  EXPECT_EQ(report.totals.allocations, 1u);
  EXPECT_EQ(report.totals.inconsistencies, 0u);
  EXPECT_EQ(report.totals.leaked_bytes, uint64_t(kMiB));
  ASSERT_EQ(report.leaks.size(), 1u);
  EXPECT_EQ(report.leaks[0].memory_kinds, std::vector<MemoryKind>{MemoryKind::HeapBlock});
  ASSERT_EQ(report.heaps.size(), 1u);
  EXPECT_EQ(report.heaps[0].allocator, "an NVTX-memory-API heap");
  EXPECT_EQ(report.totals.cached_at_exit_bytes, uint64_t(64 * kMiB));
}

// A 10 MiB segment with blocks at [0, 3), [4, 6) and [7, 8) MiB: 4 MiB free in holes of 1, 1 and 2 MiB.
TEST(HeapsTest, AFailedBlockIsLabelledFromItsHeap) {
  TraceBuilder builder;
  builder.meta(schema::meta::kTensorBlocks, "1");
  builder.meta(schema::meta::kEventsTimeOrdered, "1");
  python_stacks(builder);
  builder.begin();
  builder.alloc(100, kSegment, 10 * kMiB);
  segment(builder, 200, kSegment, 10 * kMiB);
  block(builder, 300, true, kSegment, 3 * kMiB, 1);
  block(builder, 400, true, kSegment + 4 * kMiB, 2 * kMiB, 1);
  block(builder, 500, true, kSegment + 7 * kMiB, kMiB, 1);
  builder.alloc_failed(600, 64 * kMiB, 2, 0, 1 * kMiB, 80 * kMiB);  // PyTorch's cudaMalloc for a new segment
  heap_event(builder, 700, EventKind::AllocFailed, Api::torchBlockAlloc, 0, 3 * kMiB, 2, Source::TorchAllocator, 2);
  heap_event(builder, 800, EventKind::AllocFailed, Api::torchBlockAlloc, 0, 5 * kMiB, 2, Source::TorchAllocator, 2);
  builder.commit();
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  // The cudaMalloc failed inside the first request (same thread, before it failed): its evidence, not a failure of
  // its own (failed_requests_test.cpp).
  EXPECT_EQ(report.totals.failed_allocations, 2u);
  EXPECT_EQ(report.totals.failed_attempts_in_requests, 1u);
  ASSERT_EQ(report.failures.size(), 2u);
  const AllocFailure& fragmented = report.failures[0];
  ASSERT_EQ(fragmented.attempts.size(), 1u);
  EXPECT_EQ(fragmented.attempts[0].label, "out of memory");  // the CUDA level keeps its label
  EXPECT_FALSE(fragmented.attempts[0].heap_source);
  EXPECT_EQ(fragmented.label, "heap fragmentation");
  ASSERT_TRUE(fragmented.heap);
  EXPECT_EQ(fragmented.heap->segments, 1u);
  EXPECT_EQ(fragmented.heap->reserved_bytes, uint64_t(10 * kMiB));
  EXPECT_EQ(fragmented.heap->held_bytes, uint64_t(6 * kMiB));
  EXPECT_EQ(fragmented.heap->free_bytes, uint64_t(4 * kMiB));
  EXPECT_EQ(fragmented.heap->largest_free_bytes, uint64_t(2 * kMiB));
  EXPECT_EQ(fragmented.requested_bytes, uint64_t(3 * kMiB));
  EXPECT_EQ(python_line(fragmented.stack), "/src/train.py:scratch:50");
  EXPECT_EQ(report.failures[1].label, "heap out of memory");
  EXPECT_TRUE(report.failures[1].attempts.empty());
  const std::string text = render_text(report);
  EXPECT_NE(text.find("label: fragmentation inside PyTorch's caching allocator's cache: 4.00 MiB (4194304 B) free in "
                      "its 1 segment (10.00 MiB reserved) covered the 3.00 MiB (3145728 B) requested,\n"
                      "           but its largest free block was 2.00 MiB (2097152 B)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("label: out of memory in PyTorch's caching allocator: 4.00 MiB (4194304 B) free"),
            std::string::npos)
      << text;
  const std::string json = render_json(report);
  EXPECT_NE(json.find("\"largest_free_bytes\": 2097152"), std::string::npos);
  EXPECT_NE(json.find("\"allocator\": \"PyTorch's caching allocator\""), std::string::npos);
}

}  // namespace
}  // namespace gmt::analysis

namespace gmt::analysis {
namespace {

// One request in ten keeps a 1 MiB buffer: 9 flat steps in 10, yet a steady rise over windows of repetitions.
TEST(HeapsTest, OneBufferKeptInTenRepetitionsIsSteadyGrowthOfTheRange) {
  std::vector<uint64_t> live_at_end;
  for (uint64_t i = 0; i < 200; ++i) live_at_end.push_back((i / 10 + 1) * kMiB);
  RangeGrowth sparse = evaluate_range_growth(live_at_end);
  EXPECT_TRUE(sparse.growing);
  EXPECT_EQ(sparse.steps, 19u);
  EXPECT_EQ(sparse.rising_steps, 19u);
  EXPECT_EQ(sparse.falling_steps, 0u);
  EXPECT_NEAR(sparse.bytes_per_iteration, kMiB / 10.0, kMiB / 100.0);
  // The same buffer kept once and freed ten repetitions later, again and again: no growth.
  std::vector<uint64_t> churn;
  for (uint64_t i = 0; i < 200; ++i) churn.push_back((i % 20 < 10 ? 1 : 2) * kMiB);
  EXPECT_FALSE(evaluate_range_growth(churn).growing);
}

}  // namespace
}  // namespace gmt::analysis
