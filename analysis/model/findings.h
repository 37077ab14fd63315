// The answer first (docs/analysis.md, "Findings"): each finding is one verdict -- a leak the app still held at
// exit, steady growth over time or per repetition of an NVTX range, a failed allocation with its cause -- named
// at the user's own frame (analysis/model/stack_view.h), with the text of that source line when the file is readable
// here, and one "via" line for what lies under it. Ranked by bytes. Derived from a Report; no pass of its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/model/report.h"

namespace gmt::analysis {

enum class FindingKind { Leak, Growth, RangeGrowth, FailedAllocation };
std::string_view to_string(FindingKind kind);  // "leak", "growth", "range_growth", "failed_allocation"

struct Finding {
  FindingKind kind = FindingKind::Leak;
  uint64_t bytes = 0;   // what the verdict is about: bytes held, grown, or requested
  std::string verdict;  // one sentence: "leak: 24.00 MiB in 3 allocations still held at exit"
  std::string detail;   // how sure, and the numbers behind it; "" when the verdict says it all
  // A framework's failed request: the CUDA-level attempts made inside it (also at the start of detail); "" otherwise.
  std::string evidence;
  std::string user_frame;  // frame_label of the user's frame; "" when the stack has none
  // Beside the stack, the call its memory was made for where its own thread has no user frame: "during backward() at
  // train_step train.py:42" for tensors of autograd's worker threads (LeakGroup::backward_stack_id), "during
  // backward()" when several calls ran; for blocks that `run --sample-block-stacks` took no stack for, why they have
  // none (unsampled_stack_text); "" otherwise.
  std::string during;
  std::string source_text;  // that line of the source file, trimmed; "" when the file cannot be read here
  std::string via;          // "libtorch_cuda.so -> libc10_cuda.so -> cudaMalloc"; "" when nothing lies under
  int64_t stack_id = 0;
};

// Under `run --sample-block-stacks` (TraceInfo::block_stack_sample_bytes): what a block without a stack means, in
// parentheses ("(stack not sampled: ...)"); empty when every block took its stack.
std::string unsampled_block_stack_text(const TraceInfo& trace);
// The same for a leak group: empty unless the group is a framework's blocks without a stack in such a trace.
std::string unsampled_stack_text(const TraceInfo& trace, const LeakGroup& group);

// Every finding of the report, largest first (ties: in the order above). A trace that may be missing events
// yields leaks as "live at the end of an incomplete trace", never as a verdict of leak.
std::vector<Finding> findings_of(const Report& report);

}  // namespace gmt::analysis
