// Fragmentation inside framework heaps (docs/analysis.md "Fragmentation inside heaps"), internal to analysis/: for
// each heap whose layout the trace shows (heaps.h: PyTorch's segments, NVTX-memory-API heaps, and the blocks inside
// them), the free bytes in holes and the largest hole at the peak of the bytes its blocks held, and at the end.
// This is the fragmentation that fails allocations: a block that fits in no hole makes the allocator ask CUDA for
// more. Address gaps between CUDA-level allocations say nothing of it (the driver maps pages anywhere).
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "analysis/heaps.h"
#include "analysis/model.h"

namespace gmt::analysis {

class HeapFragmentationTracker {
 public:
  // Applies a block event to `layout` (in place of HeapLayout::on_block), looking at the heap at its peak first.
  void on_block(HeapLayout& layout, int64_t source, int64_t device, bool alloc, uint64_t address, uint64_t size,
                int64_t time_ns);
  // Before a segment event of `source` changes the heap's layout: a peak not yet taken is taken now.
  void before_segment(const HeapLayout& layout, int64_t source);
  // After the pass: one entry per heap and device that held a block, by source then device. `origin` is the
  // absolute process start.
  std::vector<HeapFragmentation> finish(const HeapLayout& layout, int64_t origin) const;

 private:
  struct State {
    uint64_t held = 0;
    uint64_t peak = 0;
    int64_t peak_time = 0;      // absolute
    bool peak_pending = false;  // a new peak whose layout is not yet taken: it is, at the next free (or the end)
    HeapSpace at_peak;
  };
  using Key = std::pair<int64_t, int64_t>;  // (source, device)

  void take_pending_peak(const HeapLayout& layout, const Key& key, State& state);

  std::map<Key, State> heaps_;
  std::map<std::pair<int64_t, uint64_t>, std::pair<int64_t, uint64_t>> live_;  // (source, address) -> (device, size)
};

}  // namespace gmt::analysis
