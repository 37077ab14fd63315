// The merged report (analysis/model/merge.h) on handmade traces: NCCL attribution by module, the outlier rule at
// its boundaries, leak stacks matched across processes by symbols, rank order.
#include <gtest/gtest.h>

#include <memory>

#include "analysis/model/analyze.h"
#include "analysis/model/merge.h"
#include "trace_builder.h"

namespace gmt::analysis {
namespace {

using test_support::TraceBuilder;

constexpr int64_t kMiB = 1024 * 1024;

// Modules of a process: the CUDA runtime, NCCL and the application, each 64 KiB.
struct Modules {
  int64_t cudart, nccl, app;
  explicit Modules(TraceBuilder& b)
      : cudart(b.module("/usr/local/cuda/lib64/libcudart.so.13", 0x10000, 0x10000)),
        nccl(b.module("/usr/lib/x86_64-linux-gnu/libnccl.so.2", 0x20000, 0x10000)),
        app(b.module("/opt/train/bin/train", 0x30000, 0x10000)) {}
};

// A process whose rank `rank` holds `peak_mib` at its peak on `device` and leaks `leak_mib`, with the leak
// allocated at `leak_pc` (an app pc symbolized as train_step train.cpp:42).
std::unique_ptr<TraceBuilder> rank_trace(const std::string& rank, int64_t peak_mib, int64_t leak_mib,
                                         uint64_t leak_pc = 0x30100, int64_t device = 0) {
  auto b = std::make_unique<TraceBuilder>();
  Modules m(*b);
  b->meta(schema::meta::kRank, rank).meta(schema::meta::kDevices, std::to_string(device));
  int64_t leak_stack = b->stack({leak_pc, 0x30500});
  b->symbol(leak_pc, "train_step", "train.cpp", 42, m.app);
  b->symbol(0x30500, "main", "train.cpp", 90, m.app);
  int64_t temp_stack = b->stack({0x30200});
  b->alloc(1000, 0x1000000, (peak_mib - leak_mib) * kMiB, temp_stack, schema::Api::cudaMalloc,
           schema::MemoryKind::Device, device);
  if (leak_mib > 0) {
    b->alloc(2000, 0x9000000, leak_mib * kMiB, leak_stack, schema::Api::cudaMalloc, schema::MemoryKind::Device, device);
  }
  b->free(3000, 0x1000000);
  return b;
}

TEST(MergeTest, NcclBytesAreThoseWhoseFirstFrameOutsideCudaIsInLibnccl) {
  TraceBuilder b;
  Modules m(b);
  // Allocated by NCCL (through the runtime it links): cudart frame, then NCCL, then the app.
  int64_t by_nccl = b.stack({0x10100, 0x20100, 0x30100});
  // The app allocates; NCCL only further out (a callback): not NCCL's memory.
  int64_t by_app = b.stack({0x10200, 0x30200, 0x20200});
  b.alloc(100, 0x1000000, 100 * kMiB, by_nccl, schema::Api::cudaMalloc, schema::MemoryKind::Device, 1);
  b.alloc(200, 0x8000000, 10 * kMiB, by_app, schema::Api::cudaMalloc, schema::MemoryKind::Device, 1);
  b.alloc(300, 0xA000000, 1 * kMiB, by_nccl, schema::Api::cudaMalloc, schema::MemoryKind::Device, 0);
  b.free(400, 0xA000000);
  TraceFile trace = b.open();
  AnalyzeOptions options;
  options.top_stacks = 1000;
  ProcessSummary p = summarize_process(trace, analyze_trace(trace, options));
  ASSERT_EQ(p.per_device.size(), 2u);
  EXPECT_EQ(p.per_device[0].device, 0);
  EXPECT_EQ(p.per_device[0].peak_bytes, uint64_t(1 * kMiB));
  EXPECT_EQ(p.per_device[0].nccl_bytes_at_peak, uint64_t(1 * kMiB));
  EXPECT_EQ(p.per_device[1].device, 1);
  EXPECT_EQ(p.per_device[1].peak_bytes, uint64_t(110 * kMiB));
  EXPECT_EQ(p.per_device[1].nccl_bytes_at_peak, uint64_t(100 * kMiB));
  EXPECT_EQ(p.nccl_bytes_at_peak, uint64_t(101 * kMiB));
  EXPECT_EQ(p.nccl_bytes_at_end, uint64_t(100 * kMiB));
  EXPECT_EQ(p.devices, (std::vector<int64_t>{0, 1}));  // no meta devices: those that held memory
}

TEST(MergeTest, NcclLinkedStaticallyIsKnownByItsFunctionNames) {
  TraceBuilder b;
  int64_t cudart = b.module("/usr/local/cuda/lib64/libcudart.so.13", 0x10000, 0x10000);
  int64_t torch = b.module("/opt/torch/lib/libtorch_cuda.so", 0x40000, 0x10000);
  b.symbol(0x40100, "ncclCudaCalloc<char>(char**, unsigned long)", "alloc.h", 10, torch);
  b.symbol(0x40200, "c10::cuda::CUDACachingAllocator::malloc(unsigned long)", "alloc.cpp", 20, torch);
  int64_t static_nccl = b.stack({0x10100, 0x40100});
  int64_t caching = b.stack({0x10100, 0x40200});
  b.alloc(100, 0x1000000, 4 * kMiB, static_nccl);
  b.alloc(200, 0x2000000, 8 * kMiB, caching);
  (void)cudart;
  TraceFile trace = b.open();
  ProcessSummary p = summarize_process(trace, analyze_trace(trace));
  EXPECT_EQ(p.nccl_bytes_at_peak, uint64_t(4 * kMiB));
  EXPECT_EQ(p.nccl_bytes_at_end, uint64_t(4 * kMiB));
}

TEST(MergeTest, OutlierNeedsBothTheFactorAndTheExcessOverTheMedian) {
  // Peaks 100, 100, 160, 165 MiB: the median (lower middle) is 100 MiB. Rank 2 is 1.6x but only 60 MiB
  // above it; rank 3 is 1.65x and 65 MiB above: the only outlier. Nobody leaks.
  auto r0 = rank_trace("0", 100, 0);
  auto r1 = rank_trace("1", 100, 0);
  auto r2 = rank_trace("2", 160, 0);
  auto r3 = rank_trace("3", 165, 0);
  for (auto* b : {r0.get(), r1.get(), r2.get(), r3.get()}) b->close();
  MergedReport m = merge_traces({r3->path(), r1->path(), r0->path(), r2->path()});
  ASSERT_EQ(m.processes.size(), 4u);
  EXPECT_EQ(*m.processes[0].rank, "0");
  EXPECT_EQ(*m.processes[3].rank, "3");
  EXPECT_EQ(m.imbalance.peak.median, uint64_t(100 * kMiB));
  EXPECT_EQ(m.imbalance.peak.max, uint64_t(165 * kMiB));
  EXPECT_EQ(m.imbalance.peak.max_process, 3u);
  EXPECT_DOUBLE_EQ(*m.imbalance.peak.ratio, 1.65);
  EXPECT_FALSE(m.imbalance.leaked.ratio.has_value());  // median 0
  ASSERT_EQ(m.outliers.size(), 1u);
  EXPECT_EQ(m.outliers[0].process, 3u);
  EXPECT_EQ(m.outliers[0].measure, "peak");
  EXPECT_TRUE(m.leaks.empty());
}

TEST(MergeTest, TwoProcessesAreEachComparedWithTheOther) {
  // The lower middle of two values is the smaller: the leaking rank is compared with the clean one.
  auto r0 = rank_trace("0", 100, 0);
  auto r1 = rank_trace("1", 180, 80, 0x30100, 1);
  r0->close();
  r1->close();
  MergedReport m = merge_traces({r0->path(), r1->path()});
  EXPECT_EQ(m.imbalance.leaked.median, 0u);
  // Peak 180 vs 100 MiB: 1.8x and 80 MiB above; leaked 80 MiB vs 0: both measures name rank 1.
  ASSERT_EQ(m.outliers.size(), 2u);
  EXPECT_EQ(m.outliers[0].process, 1u);
  EXPECT_EQ(m.outliers[0].measure, "peak");
  EXPECT_EQ(m.outliers[1].process, 1u);
  EXPECT_EQ(m.outliers[1].measure, "leaked");
  EXPECT_EQ(m.outliers[1].bytes, uint64_t(80 * kMiB));
  EXPECT_EQ(m.processes[1].devices, (std::vector<int64_t>{1}));  // from meta devices
}

TEST(MergeTest, LeakStacksAtDifferentAddressesMatchBySymbols) {
  // Same function and line in both processes, different pcs (ASLR): one leak site held by both ranks.
  auto r0 = rank_trace("10", 50, 20, 0x30100);
  auto r1 = rank_trace("2", 50, 30, 0x30180);
  r0->close();
  r1->close();
  MergedReport m = merge_traces({r0->path(), r1->path()});
  ASSERT_EQ(m.processes.size(), 2u);
  EXPECT_EQ(*m.processes[0].rank, "2");  // numeric order, not text order
  ASSERT_EQ(m.leaks.size(), 1u);
  EXPECT_EQ(m.leaks[0].bytes, uint64_t(50 * kMiB));
  EXPECT_EQ(m.leaks[0].count, 2u);
  EXPECT_EQ(m.leaks[0].processes, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(*m.leaks[0].stack.frames[0].function, "train_step");
  EXPECT_FALSE(m.leaks[0].nccl);
}

TEST(MergeTest, UnreadableTraceIsListedNotThrown) {
  auto r0 = rank_trace("0", 10, 0);
  r0->close();
  MergedReport m = merge_traces({r0->path(), "/nonexistent/trace.db"});
  EXPECT_EQ(m.processes.size(), 1u);
  ASSERT_EQ(m.unreadable.size(), 1u);
  EXPECT_EQ(m.unreadable[0].path, "/nonexistent/trace.db");
  EXPECT_NE(m.unreadable[0].error.find("/nonexistent/trace.db"), std::string::npos);
}

}  // namespace
}  // namespace gmt::analysis
