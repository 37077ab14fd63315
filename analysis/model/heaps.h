// Framework heaps (docs/analysis.md "Blocks inside heaps"), internal to analysis/: an allocator that takes device
// memory from CUDA in large ranges (its heap's segments) and hands the app blocks inside them. PyTorch's caching
// allocator (source torch_allocator, blocks of memory kind tensor_block) and allocators that describe themselves
// with the NVTX memory API (source nvtx_memory, memory kind heap_block) are such heaps. Their blocks are what the
// app holds; the CUDA-level allocations that back their segments are the allocator's reservation, "cached",
// never a leak. Which sources and kinds are heaps is decided here and nowhere else.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "analysis/model/report.h"
#include "analysis/read/trace_file.h"
#include "schema/trace_schema.h"

namespace gmt::analysis {

// The capture paths whose events describe a heap: segments (SegmentAlloc/SegmentFree) and blocks inside them.
bool is_heap_source(int64_t source);
// The memory kinds of a block handed out inside a heap (never counted as device memory: its segment is).
bool is_block_kind(schema::MemoryKind kind);
// The allocator a heap source names, for sentences: "PyTorch's caching allocator", "an NVTX-memory-API heap".
std::string heap_allocator_name(int64_t source);

// The CUDA-level pass's part: which CUDA-level allocations back a heap's segment. An allocation (or a VMM physical
// handle) backs a heap when a segment overlapped its range (its mapping's, for a handle) at any time of its life;
// it is then the allocator's reservation from birth to free, and the block-level pass leaves it out.
class HeapBacking {
 public:
  void on_cuda_alloc(int64_t event_id, uint64_t address, uint64_t size);
  void on_cuda_free(uint64_t address);
  void on_vmm_create(int64_t event_id, uint64_t handle);
  void on_vmm_map(uint64_t address, uint64_t size, uint64_t handle);
  void on_vmm_unmap(uint64_t address);
  void on_segment(int64_t source, bool alloc, uint64_t address, uint64_t size);

  bool any_segment() const { return segments_seen_; }
  // The heap source whose segment the allocation (its Alloc's or VmmCreate's event id) backs; 0 when none.
  int64_t backing_source(int64_t event_id) const {
    auto it = backing_.find(event_id);
    return it == backing_.end() ? 0 : it->second;
  }

 private:
  struct Range {
    uint64_t end = 0;
    int64_t event_id = 0;  // the Alloc, or the VmmCreate of the mapped handle
  };
  std::map<uint64_t, Range> live_;                        // live CUDA-level allocations and VMM mappings by address
  std::unordered_map<uint64_t, int64_t> handle_creates_;  // VMM handle -> its VmmCreate's event id
  std::unordered_map<int64_t, int64_t> backing_;          // event id -> heap source
  bool segments_seen_ = false;
};

// The block-level pass's part: each heap's layout (its live segments and the live blocks inside them), for the
// heap's free space when a block allocation fails.
class HeapLayout {
 public:
  // `mapped`: a part mapped into an expandable segment (PyTorch's torchSegmentMap), joined with its neighbours.
  void on_segment(int64_t source, bool alloc, uint64_t address, uint64_t size, int64_t device, bool mapped);
  void on_block(int64_t source, bool alloc, uint64_t address, uint64_t size);
  // The heap of `source` on `device` at this moment: reserved, held by blocks, free, and the largest hole.
  HeapSpace space(int64_t source, int64_t device) const;
  // One segment of a heap (adjacent mapped parts of an expandable segment joined) and what its live blocks hold.
  struct Run {
    uint64_t start = 0;
    uint64_t end = 0;
    uint64_t segments = 0;  // the parts joined
    uint64_t held_bytes = 0;
    uint64_t largest_free_bytes = 0;
    uint64_t free_bytes() const { return end - start - std::min(end - start, held_bytes); }
  };
  using BlockIterator = std::map<uint64_t, uint64_t>::const_iterator;  // address -> size
  // Each run of `source` on `device` in address order, with the live blocks starting inside it [first, last).
  void for_each_run(int64_t source, int64_t device,
                    const std::function<void(const Run&, BlockIterator first, BlockIterator last)>& visit) const;
  // Live segments of every heap at this moment (at the end of the pass: at exit), by source.
  std::map<int64_t, std::pair<uint64_t, uint64_t>> live_segments() const;  // source -> (count, bytes)
  std::map<int64_t, std::pair<uint64_t, uint64_t>> live_blocks() const;    // source -> (count, bytes)

 private:
  struct Segment {
    uint64_t size = 0;
    int64_t source = 0;
    int64_t device = -1;
    bool mapped = false;
  };
  std::map<uint64_t, Segment> segments_;
  std::map<int64_t, std::map<uint64_t, uint64_t>> blocks_;  // source -> address -> size
};

// What the CudaLevel pass hands the AppLevel pass (tensor_blocks.h), and what each says about the heaps.
struct HeapPass {
  HeapBacking backing;  // CudaLevel: which CUDA-level allocations back a heap segment
  // CudaLevel: per heap source, the CUDA-level allocations backing it that are live at exit (count, bytes).
  std::map<int64_t, std::pair<uint64_t, uint64_t>> reserved_at_exit;
  HeapLayout layout;  // AppLevel: segments and blocks, for failed block allocations and the heaps at exit
};

// Makes `report` (the CudaLevel pass's) say what the app held, from the AppLevel pass: leaks, growth, ranges,
// breakdown and the peaks' stacks at block level, block failures with their heap, and Report::heaps.
void apply_app_level(Report& report, Report app, const HeapPass& heaps);

// A heap whose blocks were not recorded although the trace says its allocator was used (meta tensor_blocks "0", or
// events dropped): Report::heaps says so, and how much of the leaks is that allocator's reservation.
void add_unrecorded_heaps(Report& report, const TraceFile& trace);

// The label of a block allocation that failed with `space` in its heap: "heap fragmentation" when the heap's free
// bytes covered the request (no hole was large enough), else "heap out of memory".
std::string heap_failure_label(uint64_t requested_bytes, const HeapSpace& space);

}  // namespace gmt::analysis
