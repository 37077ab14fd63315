// Breakdowns by thread, stream and allocating module: exact allocations, bytes, leaks and bytes live at the
// total peak, worked out by hand in the comments.
#include <gtest/gtest.h>

#include "analysis/model/analyze.h"
#include "analysis/model/breakdown.h"
#include "analysis/model/report.h"
#include "analysis/render/render.h"
#include "trace_builder.h"

namespace gmt::analysis {
namespace {

using schema::EventKind;
using test_support::EventRow;
using test_support::TraceBuilder;

constexpr int64_t kKiB = 1024;
constexpr int64_t kMain = 4242;  // the trace's pid: the main thread
constexpr int64_t kWorker = 7;
constexpr int64_t kStream = 0xabc;

int64_t alloc(TraceBuilder& builder, int64_t time, int64_t address, int64_t size, int64_t stack, int64_t thread,
              int64_t stream) {
  EventRow row;
  row.time_ns = time;
  row.address = address;
  row.size = size;
  row.stack_id = stack;
  row.thread_id = thread;
  row.stream = stream;
  return builder.event(row);
}

const BreakdownRow& row_of(const std::vector<BreakdownRow>& rows, size_t index) {
  EXPECT_LT(index, rows.size());
  return rows.at(index);
}

void expect_row(const BreakdownRow& row, uint64_t allocations, int64_t allocated, int64_t leaked, int64_t peak) {
  EXPECT_EQ(row.allocations, allocations);
  EXPECT_EQ(row.allocated_bytes, uint64_t(allocated));
  EXPECT_EQ(row.leaked_bytes, uint64_t(leaked));
  EXPECT_EQ(row.peak_bytes, uint64_t(peak));
}

TEST(BreakdownTest, ByThreadStreamAndModuleAtTheTotalPeak) {
  TraceBuilder builder;
  int64_t app = builder.module("/opt/app/bin/trainer", 0x400000, 0x100000);
  int64_t cudart = builder.module("/usr/local/cuda/lib64/libcudart.so.13", 0x7e0000000000, 0x100000);
  int64_t nccl = builder.module("/usr/lib/libnccl.so.2", 0x7f0000000000, 0x100000);
  builder.symbol(0x401000, "train", "train.cpp", 3, app);
  builder.symbol(0x7e0000001000, "cudart::internal", std::nullopt, std::nullopt, cudart);
  builder.symbol(0x7f0000001000, "ncclCommInit", std::nullopt, std::nullopt, nccl);
  int64_t app_stack = builder.stack({0x401000});
  // The innermost frame is in libcudart: the allocating module is the next one, NCCL.
  int64_t nccl_stack = builder.stack({0x7e0000001000, 0x7f0000001000, 0x401000});

  alloc(builder, 10, 0x100000, 100 * kKiB, app_stack, kMain, 0);          // A: live 100
  alloc(builder, 20, 0x200000, 50 * kKiB, nccl_stack, kWorker, kStream);  // B: 150
  alloc(builder, 30, 0x300000, 30 * kKiB, nccl_stack, kWorker, kStream);  // C: 180, a first peak
  builder.free(40, 0x300000);                                             // 150
  alloc(builder, 50, 0x400000, 20 * kKiB, 0, kMain, 0);                   // D (no stack): 170
  builder.free(60, 0x400000);                                             // 150
  alloc(builder, 70, 0x500000, 40 * kKiB, app_stack, kMain, 0);           // E: 190, the peak: A, B, E
  builder.free(80, 0x100000);                                             // A freed; B and E leak

  TraceFile file = builder.open();
  Report report = analyze_trace(file);
  ASSERT_EQ(report.totals.peak_bytes, uint64_t(190 * kKiB));
  const Breakdown& breakdown = report.breakdown;

  ASSERT_EQ(breakdown.by_thread.size(), 2u);
  EXPECT_EQ(row_of(breakdown.by_thread, 0).id, kMain);  // A, D, E; A and E at the peak, E leaked
  expect_row(breakdown.by_thread[0], 3, 160 * kKiB, 40 * kKiB, 140 * kKiB);
  EXPECT_EQ(row_of(breakdown.by_thread, 1).id, kWorker);  // B, C; only B at the peak (C was freed)
  expect_row(breakdown.by_thread[1], 2, 80 * kKiB, 50 * kKiB, 50 * kKiB);

  ASSERT_EQ(breakdown.by_stream.size(), 2u);
  EXPECT_EQ(row_of(breakdown.by_stream, 0).id, 0);
  expect_row(breakdown.by_stream[0], 3, 160 * kKiB, 40 * kKiB, 140 * kKiB);
  EXPECT_EQ(row_of(breakdown.by_stream, 1).id, kStream);
  expect_row(breakdown.by_stream[1], 2, 80 * kKiB, 50 * kKiB, 50 * kKiB);

  ASSERT_EQ(breakdown.by_module.size(), 3u);
  EXPECT_EQ(row_of(breakdown.by_module, 0).module, "trainer");
  EXPECT_EQ(breakdown.by_module[0].module_path, "/opt/app/bin/trainer");
  EXPECT_FALSE(breakdown.by_module[0].label);
  expect_row(breakdown.by_module[0], 2, 140 * kKiB, 40 * kKiB, 140 * kKiB);
  EXPECT_EQ(row_of(breakdown.by_module, 1).module, "libnccl.so.2");
  EXPECT_EQ(breakdown.by_module[1].label, std::optional<std::string>("NCCL"));
  expect_row(breakdown.by_module[1], 2, 80 * kKiB, 50 * kKiB, 50 * kKiB);
  EXPECT_EQ(row_of(breakdown.by_module, 2).module, "(no stack)");
  expect_row(breakdown.by_module[2], 1, 20 * kKiB, 0, 0);

  const std::string text = render_text(report);
  EXPECT_NE(text.find("thread 4242 (main)"), std::string::npos) << text;
  EXPECT_NE(text.find("libnccl.so.2 (NCCL)"), std::string::npos) << text;
  EXPECT_NE(text.find("stream 0xabc"), std::string::npos) << text;
  const std::string json = render_json(report);
  EXPECT_NE(json.find("\"by_module\""), std::string::npos);
  EXPECT_NE(json.find("\"label\": \"NCCL\""), std::string::npos);
}

TEST(BreakdownTest, EveryAllocationCountsAlsoOnesThatNeverBecomeLive) {
  TraceBuilder builder;
  alloc(builder, 10, 0, 0, 0, kMain, 0);  // cudaMalloc(&p, 0) returning NULL: counted, never live
  alloc(builder, 20, 0x1000, 4 * kKiB, 0, kMain, 0);
  TraceFile file = builder.open();
  Report report = analyze_trace(file);
  ASSERT_EQ(report.breakdown.by_thread.size(), 1u);
  expect_row(report.breakdown.by_thread[0], 2, 4 * kKiB, 4 * kKiB, 4 * kKiB);
  EXPECT_EQ(report.breakdown.by_thread[0].allocations, report.totals.allocations);
}

TEST(BreakdownTest, ModuleLabelsAndCudaLibraries) {
  EXPECT_EQ(module_label("libnccl.so.2"), "NCCL");
  EXPECT_EQ(module_label("libtorch_cuda.so"), "PyTorch");
  EXPECT_EQ(module_label("libc10_cuda.so"), "PyTorch");
  EXPECT_EQ(module_label("libcublasLt.so.13"), "cuBLAS");
  EXPECT_EQ(module_label("trainer"), "");
  EXPECT_TRUE(is_cuda_library("libcuda.so.1"));
  EXPECT_TRUE(is_cuda_library("libcudart.so.13"));
  EXPECT_TRUE(is_cuda_library("libcupti.so.2025.1.0"));
  EXPECT_TRUE(is_cuda_library("libgpumemtrace.so"));
  EXPECT_FALSE(is_cuda_library("libnccl.so.2"));
  EXPECT_FALSE(is_cuda_library("libcublas.so.13"));  // allocates on the app's behalf: a module of its own
}

}  // namespace
}  // namespace gmt::analysis
