// PyTorch's tensor blocks (the block-level mode) as the analyzer reads them: a kind of their own, never in the
// device totals, leaks or growth; analyzed apart, by the same rules (alive at exit, growth over time and per NVTX
// repetition), named by their Python line; read correctly although they arrive late in recording order.
#include <gtest/gtest.h>

#include "analysis/model/analyze.h"
#include "analysis/model/report.h"
#include "analysis/model/tensor_blocks.h"
#include "analysis/render/render.h"
#include "trace_builder.h"

namespace gmt::analysis {
namespace {

using test_support::TraceBuilder;

constexpr int64_t kSegment = 0x7f0000000000;
constexpr int64_t kThread = 1000;

// A block event as the recorder writes it: source torch_allocator, memory kind tensor_block.
void block(TraceBuilder& builder, int64_t time_ns, bool is_free, int64_t address, int64_t size, int64_t stack_id) {
  auto kind = is_free ? schema::EventKind::Free : schema::EventKind::Alloc;
  auto api = is_free ? schema::Api::torchBlockFree : schema::Api::torchBlockAlloc;
  builder.exec("INSERT INTO events(time_ns, kind, api, source, memory_kind, thread_id, device, stream, address, size, "
               "stack_id, error) VALUES (" +
               std::to_string(TraceBuilder::kStartNs + time_ns) + ", " + std::to_string(static_cast<int>(kind)) + ", " +
               std::to_string(static_cast<int>(api)) + ", 4, 6, " + std::to_string(kThread) + ", 0, 0, " +
               std::to_string(address) + ", " + std::to_string(is_free ? 0 : size) + ", " + std::to_string(stack_id) +
               ", 0)");
}

// Python stacks: 1 = kept activation (train.py:42 in Model.forward, called from train.py:90), with PyTorch's own
// Python frame innermost; 2 = a temporary (train.py:50).
void python_stacks(TraceBuilder& builder) {
  builder.exec("INSERT INTO strings(id, text) VALUES (100, '/src/train.py'), (101, 'Model.forward'), "
               "(102, '<module>'), (103, '/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py'), "
               "(104, 'Linear.forward'), (105, 'scratch')");
  builder.exec("INSERT INTO python_frames(id, file_id, function_id, line) VALUES (1, 103, 104, 125), "
               "(2, 100, 101, 42), (3, 100, 102, 90), (4, 100, 105, 50)");
  builder.exec("INSERT INTO stacks(id, depth) VALUES (1, 3), (2, 2)");
  builder.exec("INSERT INTO stack_frames(stack_id, level, pc, python_frame_id) VALUES (1, 0, 0, 1), (1, 1, 0, 2), "
               "(1, 2, 0, 3), (2, 0, 0, 4), (2, 1, 0, 3)");
}

// A training loop of `steps` steps of 10 ms, each inside an NVTX range "step": three 1 MiB temporaries allocated
// and freed, one 2 MiB block kept. The CUDA level holds one 256 MiB segment. Blocks are written after every CUDA
// event (as drained late), with earlier times: the reader must not mix the two orders.
void training_trace(TraceBuilder& builder, int steps) {
  builder.meta(schema::meta::kEventsTimeOrdered, "1");
  builder.meta(schema::meta::kTensorBlocks, "1");
  builder.meta(schema::meta::kTensorBlocksOverruns, "0");
  python_stacks(builder);
  builder.begin();
  builder.alloc(1'000'000, kSegment, 256 << 20);
  for (int step = 0; step < steps; ++step) {
    builder.range("step", 2'000'000 + step * 10'000'000, 2'000'000 + step * 10'000'000 + 9'000'000, 0, kThread);
  }
  builder.alloc(4'000'000'000, kSegment + (1 << 30), 4096);  // a late CUDA event: after every block in time
  int64_t next_kept = kSegment + (64 << 20);
  for (int step = 0; step < steps; ++step) {
    int64_t t = 2'000'000 + step * 10'000'000;
    for (int i = 0; i < 3; ++i) block(builder, t + 1000 + i * 1000, false, kSegment + i * (1 << 20), 1 << 20, 2);
    for (int i = 0; i < 3; ++i) block(builder, t + 5000 + i * 1000, true, kSegment + i * (1 << 20), 0, 0);
    block(builder, t + 8000, false, next_kept, 2 << 20, 1);
    next_kept += 2 << 20;
  }
  builder.commit();
}

TEST(TensorBlocksTest, BlocksNeverCountAsDeviceMemory) {
  TraceBuilder builder;
  training_trace(builder, 50);
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  EXPECT_EQ(report.totals.allocations, 2u);
  EXPECT_EQ(report.totals.allocated_bytes, (256u << 20) + 4096);
  EXPECT_EQ(report.totals.peak_bytes, (256u << 20) + 4096);
  EXPECT_EQ(report.totals.leaked_bytes, (256u << 20) + 4096);
  EXPECT_EQ(report.totals.inconsistencies, 0u);
  EXPECT_EQ(report.totals.unmatched_frees, 0u);
  EXPECT_EQ(report.peak_by_kind.device, (256u << 20) + 4096);
  ASSERT_EQ(report.leaks.size(), 1u);  // the segment and the late allocation: no stack, one group
  EXPECT_TRUE(report.growth.findings.empty());
  EXPECT_TRUE(report.ranges.growth.empty());
  // Every CUDA-level event was read in time order although blocks with earlier times came after them.
  EXPECT_EQ(report.trace.event_count, 2u);
}

TEST(TensorBlocksTest, KeptTensorsAreAliveAtExitGrowAndAreNamedByTheirPythonLine) {
  TraceBuilder builder;
  training_trace(builder, 50);
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  ASSERT_TRUE(report.tensor_blocks);
  const TensorBlockReport& blocks = *report.tensor_blocks;
  EXPECT_EQ(blocks.overruns, 0u);
  EXPECT_EQ(blocks.totals.allocations, 200u);
  EXPECT_EQ(blocks.totals.frees, 150u);
  EXPECT_EQ(blocks.totals.unmatched_frees, 0u);
  EXPECT_EQ(blocks.totals.inconsistencies, 0u);
  EXPECT_EQ(blocks.totals.leaked_bytes, 50u * (2 << 20));
  EXPECT_EQ(blocks.totals.leaked_allocations, 50u);
  EXPECT_EQ(blocks.totals.peak_bytes, 50u * (2 << 20) + 1 * (1 << 20));  // last step: 49 kept + 3 temporaries
  ASSERT_EQ(blocks.alive_at_exit.size(), 1u);
  const LeakGroup& alive = blocks.alive_at_exit[0];
  EXPECT_EQ(alive.memory_kinds, std::vector<schema::MemoryKind>{schema::MemoryKind::TensorBlock});
  EXPECT_EQ(alive.apis, std::vector<schema::Api>{schema::Api::torchBlockAlloc});
  // PyTorch's own Python frame is innermost; the line that names the tensor is the app's.
  ASSERT_EQ(alive.stack.frames.size(), 3u);
  EXPECT_EQ(python_line(alive.stack), "/src/train.py:Model.forward:42");
  ASSERT_EQ(blocks.growth.findings.size(), 1u);
  ASSERT_FALSE(blocks.growth.findings[0].stacks.empty());
  EXPECT_EQ(python_line(blocks.growth.findings[0].stacks[0].stack), "/src/train.py:Model.forward:42");
  ASSERT_EQ(blocks.range_growth.size(), 1u);
  EXPECT_EQ(blocks.range_growth[0].name, "step");
  EXPECT_NEAR(blocks.range_growth[0].bytes_per_iteration, 2 << 20, 1.0);
  ASSERT_FALSE(blocks.range_growth[0].stacks.empty());
  EXPECT_EQ(python_line(blocks.range_growth[0].stacks[0].stack), "/src/train.py:Model.forward:42");
}

TEST(TensorBlocksTest, FreedTensorsGiveNoFinding) {
  TraceBuilder builder;
  builder.meta(schema::meta::kTensorBlocks, "1");
  builder.meta(schema::meta::kEventsTimeOrdered, "1");
  python_stacks(builder);
  builder.begin();
  for (int step = 0; step < 50; ++step) {
    int64_t t = 2'000'000 + step * 10'000'000;
    builder.range("step", t, t + 9'000'000, 0, kThread);
    block(builder, t + 1000, false, kSegment, 2 << 20, 1);
    block(builder, t + 2000, false, kSegment + (2 << 20), 1 << 20, 2);
    block(builder, t + 3000, true, kSegment + (2 << 20), 0, 0);
    block(builder, t + 4000, true, kSegment, 0, 0);
  }
  builder.commit();
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  ASSERT_TRUE(report.tensor_blocks);
  EXPECT_EQ(report.tensor_blocks->totals.allocations, 100u);
  EXPECT_TRUE(report.tensor_blocks->alive_at_exit.empty());
  EXPECT_TRUE(report.tensor_blocks->growth.findings.empty());
  EXPECT_TRUE(report.tensor_blocks->range_growth.empty());
  EXPECT_EQ(report.totals.allocations, 0u);
  std::string text = render_text(report);
  EXPECT_NE(text.find("tensors alive at exit: none"), std::string::npos) << text;
}

TEST(TensorBlocksTest, WithoutTheModeThereIsNoSection) {
  TraceBuilder builder;
  builder.alloc(10, 0x1000, 100);
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  EXPECT_FALSE(report.tensor_blocks);
  EXPECT_EQ(render_text(report).find("PyTorch tensors"), std::string::npos);
  EXPECT_NE(render_json(report).find("\"tensor_blocks\": null"), std::string::npos);
}

TEST(TensorBlocksTest, OverrunsAndTheSectionAreRendered) {
  TraceBuilder builder;
  training_trace(builder, 50);
  builder.meta(schema::meta::kTensorBlocksOverruns, "3");
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  ASSERT_TRUE(report.tensor_blocks);
  EXPECT_EQ(report.tensor_blocks->overruns, 3u);
  std::string text = render_text(report);
  EXPECT_NE(text.find("PyTorch tensors (block-level"), std::string::npos) << text;
  EXPECT_NE(text.find("overran 3 times"), std::string::npos) << text;
  EXPECT_EQ(text.find("GMT_"), std::string::npos) << text;  // the ring's setting is gone: none to raise
  EXPECT_NE(text.find("tensors alive at exit: 100.00 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("at Model.forward /src/train.py:42"), std::string::npos) << text;
  std::string json = render_json(report);
  EXPECT_NE(json.find("\"python_line\": \"/src/train.py:Model.forward:42\""), std::string::npos);
  EXPECT_NE(json.find("\"overruns\": 3"), std::string::npos);
}

}  // namespace
}  // namespace gmt::analysis
