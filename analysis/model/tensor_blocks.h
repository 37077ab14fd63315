// PyTorch's tensor blocks (the block-level mode; docs/analysis.md "PyTorch tensors (block-level)"): a second pass
// over the trace, over the blocks only, by the same model as device memory. Internal to analysis/.
#pragma once

#include <string>

#include "analysis/model/report.h"
#include "analysis/read/events.h"

namespace gmt::analysis {

// The frame that names where a tensor (or a CuPy array) was allocated, as the app wrote it: the innermost Python frame
// outside PyTorch's and CuPy's own Python files (a path with a "torch" or "cupy" directory) and our in-process
// package's, else the innermost frame; nullptr for no frames.
const Frame* app_python_frame(const Stack& stack);

// "file:function:line" of that frame ("" when there is none): the Python line a block-level finding names.
std::string python_line(const Stack& stack);

// The block-level section of a report, from the TensorBlocks pass.
TensorBlockReport tensor_block_report(Report blocks_pass, const TraceFile& trace);

}  // namespace gmt::analysis
