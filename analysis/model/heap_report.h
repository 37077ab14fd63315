// A framework heap's figures in a Report (report.h): its space at one moment, its allocator at exit, and the
// fragmentation inside it over time (heaps.h, heap_fragmentation.h, docs/analysis.md "Blocks inside heaps").
// Split from report.h, which includes this header: include report.h to use them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/read/stacks.h"

namespace gmt::analysis {

// A framework heap's space at one moment (heaps.h): its live segments, the blocks live inside them, and the holes.
struct HeapSpace {
  uint64_t segments = 0;
  uint64_t reserved_bytes = 0;      // the heap's live segments on the device
  uint64_t held_bytes = 0;          // live blocks inside them
  uint64_t free_bytes = 0;          // reserved - held: cached by the allocator, free for the next block
  uint64_t largest_free_bytes = 0;  // the largest hole between live blocks (adjacent segments joined)
};

// HeapAtExit::source of JAX/XLA's preallocated arena (allocators.h is_xla_arena): no event of a heap source
// describes it; its CUDA-level allocations are told by their stacks.
inline constexpr int64_t kXlaArenaSource = 0;

// One framework heap's allocator at exit (heaps.h, docs/analysis.md "Blocks inside heaps").
struct HeapAtExit {
  int64_t source = 0;     // schema::Source code, or kXlaArenaSource
  std::string allocator;  // "PyTorch's caching allocator", "an NVTX-memory-API heap", "JAX/XLA's preallocated arena"
  // The CUDA-level allocations backing its segments, live at exit (the allocator's reservation).
  uint64_t reserved_bytes = 0;
  uint64_t reserved_allocations = 0;
  uint64_t segments = 0;  // its segments live at exit
  uint64_t segment_bytes = 0;
  uint64_t held_bytes = 0;  // its blocks live at exit (in the leaks)
  uint64_t held_blocks = 0;
  // false: the blocks were not (all) recorded (note says why): what the app held inside the reservation is not
  // known, so no verdict on it is clean. in_leaks: its reservation could not be told apart from other CUDA-level
  // memory (no segment was recorded) and stays in the leaks.
  bool blocks_recorded = true;
  bool in_leaks = false;
  // An arena that records no blocks by design (JAX/XLA's): its reservation is cached, not a leak, and the leak groups
  // hold none of it, but what the app held inside it is unknown (blocks_recorded is false): no verdict on that.
  bool opaque = false;
  std::string note;
  bool cached() const { return (blocks_recorded || opaque) && !in_leaks; }
};

// Live blocks of one call stack (grouped as leaks are) that pin a heap's holes at one moment (heap_fragmentation.h):
// blocks in a segment that also has free bytes, so that the allocator can neither give the segment back nor join
// its holes. A segment with no live block pins nothing (the allocator could release it).
struct HeapPinGroup {
  Stack stack;                     // the group's lowest-id raw stack
  std::vector<int64_t> stack_ids;  // every raw stack of the group pinning then, ascending
  uint64_t blocks = 0;             // its live blocks in segments with free bytes
  uint64_t bytes = 0;              // what those blocks hold
  uint64_t segments = 0;           // the segments they sit in (adjacent mapped parts joined, as HeapSpace counts holes)
  uint64_t free_bytes = 0;         // the free bytes in those segments, each segment once
};

// A framework heap at the end of one time bucket (HeapFragmentation::over_time): its state after the last change
// inside the bucket, else as it stood before. The holes' ratio is 1 - largest_free_bytes / free_bytes.
struct HeapBucket {
  int64_t time_ns = 0;  // the bucket's start, relative to the process start
  uint64_t reserved_bytes = 0;
  uint64_t held_bytes = 0;
  uint64_t free_bytes = 0;
  uint64_t largest_free_bytes = 0;
};
// At most this many buckets per heap: widths double from kHeapBucketStartNs until the trace fits.
inline constexpr size_t kMaxHeapBuckets = 1000;
inline constexpr int64_t kHeapBucketStartNs = 1000;

// Fragmentation inside one framework heap on one device (heap_fragmentation.h, docs/analysis.md "Fragmentation
// inside heaps"): the free bytes in holes between its live blocks and the largest hole, where we see the layout.
struct HeapFragmentation {
  int64_t source = 0;     // schema::Source code
  std::string allocator;  // as HeapAtExit::allocator
  int64_t device = -1;
  uint64_t peak_held_bytes = 0;  // the most its blocks held on the device
  int64_t peak_time_ns = 0;      // the first moment of that peak, relative to the process start
  HeapSpace at_peak;             // the heap at that moment
  HeapSpace at_end;              // at the end of the trace
  // The live blocks pinning holes at those moments, by call stack: most free bytes pinned first, then most held.
  std::vector<HeapPinGroup> pinned_at_peak;
  std::vector<HeapPinGroup> pinned_at_end;
  // The heap over time: buckets of bucket_ns from the process start to the end of the trace (every heap of a
  // report has the same width), each the heap's state at the end of the bucket.
  int64_t bucket_ns = 0;
  std::vector<HeapBucket> over_time;
};

}  // namespace gmt::analysis
