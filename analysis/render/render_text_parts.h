// The text report's sections about memory over time (render_text_over_time.cpp), internal to analysis/:
// render_text.cpp calls them in its order.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "analysis/model/report.h"
#include "analysis/render/render.h"

namespace gmt::analysis {

// At most this many call stacks per moment in the text report (the JSON report has top_stacks of them).
inline constexpr size_t kTextStacksPerMoment = 3;

// `width` characters of ▁▂▃▄▅▆▇█, each the highest level among the buckets it covers, scaled to the
// highest level of all; a space where nothing was live. Fewer characters when there are fewer buckets.
std::string sparkline(const std::vector<TimelineBucket>& buckets, size_t width);

// "6.2 h", "42.0 min", "12.3 s", "3.5 days": how long until a device is full.
std::string format_seconds(double seconds);

// The innermost frame of a stack on one line ("at f file:line [module]").
std::string one_line_stack(const Stack& stack);

// A call stack as analysis/model/stack_view.h shows it, a line each (render_text.cpp); options.max_frames 0: all.
void append_call_stack(std::string& out, const Stack& stack, const RenderOptions& options);
// Under the header: each device's name and UUID from the devices table (render_text_imported.cpp).
void append_devices(std::string& out, const Report& report);
// Under the devices: run --verify's cross-check, the disagreements first (render_verify.cpp); nothing otherwise.
void append_cross_check(std::string& out, const Report& report, const RenderOptions& options);
// After the leaks: other processes' memory opened here, per device, and the handles left open.
void append_imported(std::string& out, const Report& report, const RenderOptions& options);

// Under the header: the filters in effect and what they matched (render_text_ranges.cpp).
void append_filters(std::string& out, const Report& report);
// "Memory by NVTX range" and the growth per repetition of repeated ranges (render_text_ranges.cpp).
void append_ranges(std::string& out, const Report& report, const RenderOptions& options);

// "PyTorch tensors (block-level)": the block-level mode's section (render_text_blocks.cpp); nothing without it.
void append_tensor_blocks(std::string& out, const Report& report, const RenderOptions& options);

// Under the peak line: the sparkline and, per device, the stacks live at its peak.
void append_peak_over_time(std::string& out, const Report& report, const RenderOptions& options);
void append_growth(std::string& out, const Report& report, const RenderOptions& options);
// Fragmentation inside heaps (with the blocks pinning holes and the heap over time) and the stream-ordered pools' used
// and reserved bytes (render_text_pools.cpp).
void append_heap_fragmentation(std::string& out, const Report& report, const RenderOptions& options);
void append_pools(std::string& out, const Report& report);
// After a failure's "device free" line: its OOM label, explained (nothing for errors other than OOM).
void append_failure_label(std::string& out, const AllocFailure& failure);
// Framework heaps (render_text_heaps.cpp): the frame a one-line summary names (the app's Python line for a
// tensor's stack that starts in PyTorch's C++), and "    allocated at ..." when that is not the innermost frame;
// the reservations at exit; the verdict when nothing leaked; a failed block allocation's label (false: not one).
const Frame* summary_frame(const Stack& stack);
std::string user_line_note(const Stack& stack);
void append_cached_at_exit(std::string& out, const Report& report);
std::string no_leaks_verdict(const Report& report);
bool append_heap_failure_label(std::string& out, const AllocFailure& failure);
// Its CUDA-level attempts and the segments its allocator released within it; nothing for a CUDA-level failure.
void append_failure_attempts(std::string& out, const AllocFailure& failure);
// After a failure's stack: who held the memory.
void append_failure_forensics(std::string& out, const AllocFailure& failure, const RenderOptions& options);

// A framework allocator's curves beside the CUDA-level one, `columns` marks from 0 to end_ns: per column the most
// reserved and in use (a sample's level holds until the next sample) and the device's most live bytes
// (render_text_allocators.cpp; the HTML draws the samples themselves).
struct AllocatorCurves {
  int64_t end_ns = 0;
  std::vector<uint64_t> reserved;
  std::vector<uint64_t> in_use;
  std::vector<uint64_t> cuda_level;
  static uint64_t highest(const std::vector<uint64_t>& values);
};
AllocatorCurves allocator_curves(const Report& report, const AllocatorDevice& device, size_t columns);
// "Framework allocator statistics" per device, and "PyTorch out of memory" (render_text_allocators.cpp).
void append_allocator_stats(std::string& out, const Report& report);
void append_allocator_ooms(std::string& out, const Report& report, const RenderOptions& options);
// One line under the header for an aggregate trace (render_aggregate.cpp); nothing for a full one.
void append_aggregate_note(std::string& out, const Report& report);

}  // namespace gmt::analysis
