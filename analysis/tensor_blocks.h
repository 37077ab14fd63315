// PyTorch's tensor blocks (the block-level mode; docs/analysis.md "PyTorch tensors (block-level)"): a second pass
// over the trace, over the blocks only, by the same model as device memory. Internal to analysis/.
#pragma once

#include <string>

#include "analysis/model.h"
#include "analysis/read/events.h"

namespace gmt::analysis {

struct HeapPass;  // model.cpp: what the CudaLevel pass hands the AppLevel pass

// One pass over one set of events (model.cpp).
// `heaps`: filled by the CudaLevel pass, read by the AppLevel pass; nullptr for TensorBlocks.
Report analyze_event_set(const TraceFile& trace, const AnalyzeOptions& options, EventSet set, HeapPass* heaps);

// The frame that names where a tensor was allocated, as the app wrote it: the innermost Python frame outside
// PyTorch's own Python files (a path with a "torch" directory), else the innermost frame; nullptr for no frames.
const Frame* app_python_frame(const Stack& stack);

// "file:function:line" of that frame ("" when there is none): the Python line a block-level finding names.
std::string python_line(const Stack& stack);

// The block-level section of a report, from the TensorBlocks pass.
TensorBlockReport tensor_block_report(Report blocks_pass, const TraceFile& trace);

}  // namespace gmt::analysis
