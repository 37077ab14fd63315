// Python frames (schema v5) as the analyzer reads them: frames with function, file and line and the module
// "python", grouped by source position like symbolized native frames; older traces read as before.
#include <gtest/gtest.h>

#include "analysis/model/analyze.h"
#include "analysis/model/report.h"
#include "trace_builder.h"

namespace gmt::analysis {
namespace {

using test_support::TraceBuilder;

Report analyze(TraceBuilder& builder) {
  TraceFile trace = builder.open();
  return analyze_trace(trace, AnalyzeOptions{});
}

// A stack whose frames are native pcs or, for a negative entry -n, python_frames row n.
void python_stack(TraceBuilder& builder, int64_t id, const std::vector<int64_t>& frames) {
  builder.exec("INSERT INTO stacks(id, depth) VALUES (" + std::to_string(id) + ", " + std::to_string(frames.size()) +
               ")");
  for (size_t level = 0; level < frames.size(); ++level) {
    int64_t pc = frames[level] > 0 ? frames[level] : 0;
    int64_t python = frames[level] < 0 ? -frames[level] : 0;
    builder.exec("INSERT INTO stack_frames(stack_id, level, pc, python_frame_id) VALUES (" + std::to_string(id) + ", " +
                 std::to_string(level) + ", " + std::to_string(pc) + ", " + std::to_string(python) + ")");
  }
}

void python_tables(TraceBuilder& builder) {
  builder.exec("INSERT INTO strings(id, text) VALUES (1, '/src/train.py'), (2, 'Model.build'), (3, '<module>')");
  builder.exec("INSERT INTO python_frames(id, file_id, function_id, line) VALUES (1, 1, 2, 12), (2, 1, 3, 30)");
}

TEST(PythonFramesModelTest, PythonFramesAreFramesOfTheStackInOrder) {
  TraceBuilder builder;
  int64_t module = builder.module("/usr/lib/libtorch_cuda.so", 0x1000, 0x1000);
  builder.symbol(0x1100, "c10::cuda::CUDACachingAllocator::malloc", "alloc.cpp", 40, module);
  builder.symbol(0x1200, "c10::cuda::CUDACachingAllocator::malloc", "alloc.cpp", 40, module);
  python_tables(builder);
  // Two raw stacks that differ only in a native pc of the same source line: one leak group.
  python_stack(builder, 1, {0x1100, -1, -2});
  python_stack(builder, 2, {0x1200, -1, -2});
  builder.alloc(1, 0xa000, 100, 1);
  builder.alloc(2, 0xb000, 50, 2);
  Report report = analyze(builder);
  ASSERT_EQ(report.leaks.size(), 1u);
  const LeakGroup& leak = report.leaks[0];
  EXPECT_EQ(leak.bytes, 150u);
  EXPECT_EQ(leak.stack_ids, (std::vector<int64_t>{1, 2}));
  ASSERT_EQ(leak.stack.frames.size(), 3u);
  const Frame& native = leak.stack.frames[0];
  EXPECT_FALSE(native.python);
  EXPECT_EQ(native.module, "/usr/lib/libtorch_cuda.so");
  const Frame& build = leak.stack.frames[1];
  EXPECT_TRUE(build.python);
  EXPECT_EQ(build.pc, 0u);
  EXPECT_EQ(build.function, "Model.build");
  EXPECT_EQ(build.file, "/src/train.py");
  EXPECT_EQ(build.line, 12);
  EXPECT_EQ(build.module, std::string(kPythonModule));
  EXPECT_EQ(leak.stack.frames[2].function, "<module>");
  EXPECT_EQ(leak.stack.frames[2].line, 30);
}

TEST(PythonFramesModelTest, DifferentPythonLinesAreDifferentGroups) {
  TraceBuilder builder;
  python_tables(builder);
  builder.exec("INSERT INTO python_frames(id, file_id, function_id, line) VALUES (3, 1, 2, 13)");
  python_stack(builder, 1, {0x1100, -1, -2});
  python_stack(builder, 2, {0x1100, -3, -2});
  builder.alloc(1, 0xa000, 100, 1);
  builder.alloc(2, 0xb000, 50, 2);
  Report report = analyze(builder);
  ASSERT_EQ(report.leaks.size(), 2u);
  EXPECT_EQ(report.leaks[0].stack.frames[1].line, 12);
  EXPECT_EQ(report.leaks[1].stack.frames[1].line, 13);
}

TEST(PythonFramesModelTest, Version4TracesWithoutPythonFramesAreStillRead) {
  test_support::TraceBuilderOptions options;
  options.user_version = 4;
  TraceBuilder builder(options);
  builder.exec("DROP TABLE python_frames");
  builder.exec("ALTER TABLE stack_frames DROP COLUMN python_frame_id");
  int64_t stack = builder.stack({0x1100});
  builder.symbol(0x1100, "load_weights", "leaky.cu", 19, std::nullopt);
  builder.alloc(1, 0xa000, 100, stack);
  Report report = analyze(builder);
  EXPECT_EQ(report.trace.schema_version, 4);
  ASSERT_EQ(report.leaks.size(), 1u);
  ASSERT_EQ(report.leaks[0].stack.frames.size(), 1u);
  EXPECT_FALSE(report.leaks[0].stack.frames[0].python);
  EXPECT_EQ(report.leaks[0].stack.frames[0].function, "load_weights");
}

}  // namespace
}  // namespace gmt::analysis
