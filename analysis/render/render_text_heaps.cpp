// The text report's lines about framework heaps (heaps.h, docs/analysis.md "Blocks inside heaps"): what each
// allocator still held at exit (cached, not leaked), the verdict when nothing leaked, and the label of a block
// allocation a heap failed. Every number comes from Report::heaps and AllocFailure::heap.
#include <fmt/core.h>

#include <algorithm>
#include <cctype>

#include "analysis/format.h"
#include "analysis/model/stack_view.h"
#include "analysis/model/tensor_blocks.h"
#include "analysis/render/render_text_parts.h"

namespace gmt::analysis {
// A stack starting in a framework's or CUDA's code (a tensor's, in PyTorch's C++): the user's own frame
// (analysis/model/stack_view.h) is the one to read; else the innermost.
const Frame* summary_frame(const Stack& stack) {
  if (stack.frames.empty()) return nullptr;
  const Frame* user = user_frame(stack);
  return user ? user : &stack.frames.front();
}

std::string user_line_note(const Stack& stack) {
  const Frame* frame = summary_frame(stack);
  if (!frame || frame == &stack.frames.front()) return "";
  return "    allocated at " + frame_label(*frame) + "\n";
}

void append_cached_at_exit(std::string& out, const Report& report) {
  for (const HeapAtExit& heap : report.heaps) {
    if (heap.opaque) {  // JAX/XLA's arena: cached, and the one line on how to see its buffers
      out += fmt::format("  cached at exit      {} in {} by {} (not a leak; no verdict on JAX's buffers in it: {})\n",
                         format_bytes_exact(heap.reserved_bytes),
                         count_of(heap.reserved_allocations, "allocation", "allocations"), heap.allocator, heap.note);
    } else if (heap.cached()) {
      if (heap.reserved_allocations == 0) continue;
      out += fmt::format("  cached at exit      {} in {} by {} (its reservation, not a leak)\n",
                         format_bytes_exact(heap.reserved_bytes),
                         count_of(heap.reserved_allocations, "allocation", "allocations"), heap.allocator);
    } else {
      out += fmt::format("  reserved at exit    {} in {} by {}, blocks not recorded ({}){}\n",
                         format_bytes_exact(heap.reserved_bytes),
                         count_of(heap.reserved_allocations, "allocation", "allocations"), heap.allocator, heap.note,
                         heap.in_leaks ? ": counted as leaked above" : ": what the app held in it is unknown");
    }
  }
}

std::string no_leaks_verdict(const Report& report) {
  // Where only JAX/XLA's arena is unknown, no_leaks_sentence says so and its "cached at exit" line says how to see it.
  if (!listed_leaks_exact(report)) {
    std::string out = "\nNo leak among what was recorded, but not every block was:\n";
    for (const HeapAtExit& heap : report.heaps) {
      if (heap.blocks_recorded) continue;
      out += fmt::format("  {} reserved {} at exit, blocks not recorded ({})\n", heap.allocator,
                         format_bytes_exact(heap.reserved_bytes), heap.note);
    }
    return out;
  }
  std::string sentence = no_leaks_sentence(report);  // no verdict from an incomplete trace (model.h)
  sentence[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(sentence[0])));
  if (supports_verdict(report.trace) && leak_verdict_complete(report) && report.totals.allocations > 0 &&
      report.totals.cached_at_exit_bytes > 0) {
    return fmt::format("\nNo leaks: the app freed everything it allocated ({} cached by the allocators above is not a "
                       "leak).\n",
                       format_bytes(report.totals.cached_at_exit_bytes));
  }
  return "\n" + sentence + ".\n";
}

bool append_heap_failure_label(std::string& out, const AllocFailure& failure) {
  if (!failure.heap_source) return false;
  if (!failure.heap) {
    out += fmt::format("    label: {} could not hand out the block\n", failure.allocator);
    return true;
  }
  const HeapSpace& heap = *failure.heap;
  if (failure.label == "heap fragmentation") {
    out += fmt::format(
        "    label: fragmentation inside {}'s cache: {} free in its {} ({} reserved) covered the {} requested,\n"
        "           but its largest free block was {}\n",
        failure.allocator, format_bytes_exact(heap.free_bytes), count_of(heap.segments, "segment", "segments"),
        format_bytes(heap.reserved_bytes), format_bytes_exact(failure.requested_bytes),
        format_bytes_exact(heap.largest_free_bytes));
  } else {
    out +=
        fmt::format("    label: out of memory in {}: {} free in its {} ({} reserved, largest free block {}) < the {} "
                    "requested, and CUDA gave it no more\n",
                    failure.allocator, format_bytes_exact(heap.free_bytes),
                    count_of(heap.segments, "segment", "segments"), format_bytes(heap.reserved_bytes),
                    format_bytes(heap.largest_free_bytes), format_bytes_exact(failure.requested_bytes));
  }
  out += user_line_note(failure.stack);
  return true;
}

// The CUDA-level attempts made inside a framework's failed request (analysis/model/failed_requests.h).
void append_failure_attempts(std::string& out, const AllocFailure& failure) {
  if (failure.attempts.empty() && failure.segments_released == 0) return;
  out += fmt::format("    inside this request, at the CUDA level (its evidence, not failures of their own):\n");
  for (const AllocFailure& attempt : failure.attempts) {
    out += fmt::format("      {} of {} failed at {}: {}", schema::to_string(attempt.api),
                       format_bytes_exact(attempt.requested_bytes), format_duration(attempt.time_ns),
                       cuda_error_name(attempt.error));
    if (attempt.device_free) {
      out += fmt::format(", device free {}",
                         format_bytes_exact(static_cast<uint64_t>(std::max<int64_t>(0, *attempt.device_free))));
    }
    out += "\n";
  }
  if (failure.segments_released > 0) {
    out += fmt::format("      {} released {} ({}) within the request to retry\n", failure.allocator,
                       count_of(failure.segments_released, "cached segment", "cached segments"),
                       format_bytes_exact(failure.segment_bytes_released));
  }
}

}  // namespace gmt::analysis
