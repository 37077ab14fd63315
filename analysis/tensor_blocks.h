// PyTorch's tensor blocks (the block-level mode; docs/analysis.md "PyTorch tensors (block-level)"): a second pass
// over the trace, over the blocks only, by the same model as device memory. Internal to analysis/.
#pragma once

#include <string>

#include "analysis/model.h"

namespace gmt::analysis {

// Which events one pass reads. The recorder keeps each set in time order on its own (meta events_time_ordered):
// blocks are drained from PyTorch's history up to seconds after they happened, so they never mix into the
// CUDA-level pass, and tensor blocks never count towards device memory.
enum class EventSet {
  CudaLevel,     // every event but PyTorch's tensor blocks
  TensorBlocks,  // source torch_allocator only; a block counts as device memory within this pass
};

// The WHERE clause that selects `set` from `events e`.
inline std::string events_of(EventSet set) {
  const int torch = static_cast<int>(schema::Source::TorchAllocator);
  return set == EventSet::TensorBlocks ? " WHERE e.source = " + std::to_string(torch)
                                       : " WHERE e.source != " + std::to_string(torch);
}

// One pass over one set of events (model.cpp).
Report analyze_event_set(const TraceFile& trace, const AnalyzeOptions& options, EventSet set);

// The frame that names where a tensor was allocated, as the app wrote it: the innermost Python frame outside
// PyTorch's own Python files (a path with a "torch" directory), else the innermost frame; nullptr for no frames.
const Frame* app_python_frame(const Stack& stack);

// "file:function:line" of that frame ("" when there is none): the Python line a block-level finding names.
std::string python_line(const Stack& stack);

// The block-level section of a report, from the TensorBlocks pass.
TensorBlockReport tensor_block_report(Report blocks_pass, const TraceFile& trace);

}  // namespace gmt::analysis
