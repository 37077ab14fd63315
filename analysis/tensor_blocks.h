// PyTorch's tensor blocks (the block-level mode; docs/analysis.md "PyTorch tensors (block-level)"): a second pass
// over the trace, over the blocks only, by the same model as device memory. Internal to analysis/.
#pragma once

#include <string>

#include "analysis/model.h"

namespace gmt::analysis {

// Which events one pass reads (heaps.h says which sources are heaps). The recorder keeps the events of source
// torch_allocator in time order with all others since v7; in v6 traces they were drained from PyTorch's history up to
// seconds late, had no segments, and are read on their own (the TensorBlocks pass) only.
enum class EventSet {
  CudaLevel,     // every event but heaps' blocks: device memory; heaps' segments only say which memory backs them
  TensorBlocks,  // source torch_allocator only; a block counts as device memory within this pass
  // What the app holds: heaps' blocks (as device memory) and every CUDA-level allocation that backs no heap
  // segment (the CudaLevel pass found which do); heaps' segments give the heaps' layout.
  AppLevel,
};

// The WHERE clause that selects `set` from `events e`.
inline std::string events_of(EventSet set) {
  const int torch = static_cast<int>(schema::Source::TorchAllocator);
  const std::string heaps =
      std::to_string(torch) + ", " + std::to_string(static_cast<int>(schema::Source::NvtxMemory));
  const std::string segments = std::to_string(static_cast<int>(schema::EventKind::SegmentAlloc)) + ", " +
                               std::to_string(static_cast<int>(schema::EventKind::SegmentFree));
  switch (set) {
    case EventSet::TensorBlocks:
      return " WHERE e.source = " + std::to_string(torch);
    case EventSet::AppLevel:
      return " WHERE 1";
    case EventSet::CudaLevel:
    default:
      return " WHERE (e.source NOT IN (" + heaps + ") OR e.kind IN (" + segments + "))";
  }
}

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
