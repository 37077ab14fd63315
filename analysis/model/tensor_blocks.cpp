#include "analysis/model/tensor_blocks.h"

#include <charconv>

namespace gmt::analysis {
namespace {

// The pass counted blocks as device memory: name them as what they are again.
void name_blocks(std::vector<schema::MemoryKind>& kinds) {
  for (schema::MemoryKind& kind : kinds) {
    if (kind == schema::MemoryKind::Device) kind = schema::MemoryKind::TensorBlock;
  }
}

// A framework's own Python files: PyTorch's, and CuPy's (whose arrays are blocks of a heap too).
bool in_pytorch(const std::string& file) {
  return file.find("/torch/") != std::string::npos || file.rfind("torch/", 0) == 0 ||
         file.find("/cupy/") != std::string::npos;
}

// Our in-process package's own frames (its wrapper around backward(), python/gpumemtrace_inprocess/): never the app's.
bool in_profiler(const std::string& file) { return file.find("/gpumemtrace_inprocess/") != std::string::npos; }

}  // namespace

const Frame* app_python_frame(const Stack& stack) {
  for (const Frame& frame : stack.frames) {
    if (frame.python && !in_pytorch(frame.file.value_or("")) && !in_profiler(frame.file.value_or(""))) return &frame;
  }
  return stack.frames.empty() ? nullptr : &stack.frames.front();
}

std::string python_line(const Stack& stack) {
  const Frame* frame = app_python_frame(stack);
  if (!frame) return "";
  return frame->file.value_or("?") + ":" + frame->function.value_or("?") + ":" +
         (frame->line ? std::to_string(*frame->line) : std::string("?"));
}

TensorBlockReport tensor_block_report(Report pass, const TraceFile& trace) {
  TensorBlockReport blocks;
  if (auto text = trace.meta(schema::meta::kTensorBlocksOverruns)) {
    uint64_t value = 0;
    auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
    if (error == std::errc() && end == text->data() + text->size()) blocks.overruns = value;
  }
  blocks.totals = pass.totals;
  // Every block counted as "device" in the pass: an Alloc of another kind is not a block (a damaged trace).
  blocks.alive_at_exit = std::move(pass.leaks);
  for (LeakGroup& group : blocks.alive_at_exit) name_blocks(group.memory_kinds);
  blocks.alive_groups_total = pass.leak_groups_total;
  blocks.alive_groups_below_min_bytes = pass.leak_groups_below_min_bytes;
  blocks.peaks = std::move(pass.peaks);
  blocks.growth = std::move(pass.growth);
  blocks.range_growth = std::move(pass.ranges.growth);
  return blocks;
}

}  // namespace gmt::analysis
