// Fragmentation inside framework heaps (docs/analysis.md "Fragmentation inside heaps"), internal to analysis/: for
// each heap whose layout the trace shows (heaps.h: PyTorch's segments, NVTX-memory-API heaps, and the blocks inside
// them), the free bytes in holes and the largest hole at the peak of the bytes its blocks held, and at the end;
// the live blocks that pin the holes then, by call stack; and the heap at the end of each time bucket.
// This is the fragmentation that fails allocations: a block that fits in no hole makes the allocator ask CUDA for
// more. Address gaps between CUDA-level allocations say nothing of it (the driver maps pages anywhere).
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "analysis/model/heaps.h"
#include "analysis/model/report.h"
#include "analysis/model/timeline.h"

namespace gmt::analysis {

class HeapFragmentationTracker {
 public:
  // `origin`: the absolute time of the process start (or of the first event), for the time buckets.
  explicit HeapFragmentationTracker(int64_t origin = 0) : origin_(origin) {}
  void set_origin(int64_t origin) { origin_ = origin; }
  // Where the trace says when it ended (absolute): the buckets start as wide as they will end, so that the heap is
  // walked once per bucket rather than at every width on the way. The result is the same.
  void expect_end(int64_t end) { bucket_of(end); }

  // Applies a block event to `layout` (in place of HeapLayout::on_block), looking at the heap at its peak first.
  void on_block(HeapLayout& layout, int64_t source, int64_t device, bool alloc, uint64_t address, uint64_t size,
                int64_t stack_id, int64_t time_ns);
  // Before a segment event of `source` on `device` changes the heap's layout: a peak not yet taken is taken now,
  // and the heap's state closes the time buckets before this event's.
  void before_segment(const HeapLayout& layout, int64_t source, int64_t device, int64_t time_ns);
  // After the pass: one entry per heap and device that held a block, by source then device. `end_ns` is the end of
  // the trace, relative to the origin.
  std::vector<HeapFragmentation> finish(const HeapLayout& layout, int64_t end_ns, const StackLoadFn& load_stack,
                                        const StackKeyFn& stack_key);

 private:
  using Key = std::pair<int64_t, int64_t>;  // (source, device)
  // The live blocks of one raw stack pinning holes at one moment, before stacks are grouped.
  struct RawPin {
    uint64_t blocks = 0;
    uint64_t bytes = 0;
    std::map<uint64_t, uint64_t> runs;  // the runs they sit in: start -> free bytes
  };
  using Pins = std::map<int64_t, RawPin>;  // raw stack id -> its pinning blocks
  struct State {
    uint64_t held = 0;
    uint64_t peak = 0;
    int64_t peak_time = 0;      // absolute
    bool peak_pending = false;  // a new peak whose layout is not yet taken: it is, at the next free (or the end)
    HeapSpace at_peak;
    Pins pinned_at_peak;
    std::vector<HeapBucket> closed;  // the buckets before `open`, each the heap at its end
    size_t open = 0;                 // the bucket of the heap's latest change
  };
  struct Block {
    int64_t device = -1;
    uint64_t size = 0;
    int64_t stack_id = 0;
  };

  void take_pending_peak(const HeapLayout& layout, const Key& key, State& state);
  // The heap as it stands now (before an event at `time_ns`) ends every bucket before that event's.
  void advance(const HeapLayout& layout, const Key& key, State& state, int64_t time_ns);
  size_t bucket_of(int64_t time_ns);  // doubles the width (for every heap) until it fits kMaxHeapBuckets
  Pins pins(const HeapLayout& layout, const Key& key) const;
  static void close_until(State& state, size_t bucket, const HeapSpace& space, int64_t bucket_ns);
  static std::vector<HeapPinGroup> group(const Pins& pins, const StackLoadFn& load_stack, const StackKeyFn& stack_key);

  int64_t origin_ = 0;
  int64_t bucket_ns_ = kHeapBucketStartNs;
  std::map<Key, State> heaps_;
  std::map<std::pair<int64_t, uint64_t>, Block> live_;  // (source, address) -> the live block
};

}  // namespace gmt::analysis
