// What the interactive HTML page draws besides the Report, from one more pass over the trace's lives (lifetimes.h),
// every part bounded whatever the event count (levels of detail):
//   - slices: single allocations for zoomed-in views (allocation_slices.h: the largest of each window of the run);
//   - layers: per device, the live bytes of its top call stacks sampled at the end of each of kLayerBuckets equal
//     buckets, the rest summed as "other" (the Report's timeline gives the exact min/max envelope);
//   - allocated_by_stack: bytes allocated in total per call stack (the flamegraph's "allocated" weight), the top
//     kMaxAllocatedStacks, the rest summed;
//   - heap_moments: heaps' segments with their live blocks and holes at chosen moments (each device's peak, each
//     failed allocation up to kMaxHeapMoments, the end), at most kMaxMomentBlocks blocks each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/model/allocation_slices.h"
#include "analysis/model/report.h"
#include "analysis/model/snapshot.h"

namespace gmt::analysis {

inline constexpr size_t kLayerBuckets = 300;
inline constexpr size_t kLayerStacks = 12;
inline constexpr size_t kMaxAllocatedStacks = 200;
inline constexpr size_t kMaxHeapMoments = 12;
inline constexpr size_t kMaxMomentBlocks = 20'000;

struct StackLayers {
  int64_t device = -1;
  std::vector<int64_t> stack_ids;            // the top stacks, most bytes at their highest first
  std::vector<std::vector<uint64_t>> bytes;  // per stack, per bucket: live at the bucket's end
  std::vector<uint64_t> other;               // every other stack together
};

struct StackTotal {
  int64_t stack_id = 0;
  uint64_t bytes = 0;
  uint64_t allocations = 0;
};

struct HeapMoment {
  std::string label;  // "peak of device 0", "failed allocation 1", "end"
  int64_t time_ns = 0;
  std::vector<SnapshotSegment> segments;  // every device's live heap segments, blocks and holes
  uint64_t blocks_left_out = 0;           // past kMaxMomentBlocks
};

struct ViewerData {
  AllocationSlices slices;
  int64_t bucket_ns = 0;
  std::vector<StackLayers> layers;  // by device
  std::vector<StackTotal> allocated_by_stack;
  SummedLives allocated_other;  // stacks past kMaxAllocatedStacks
  std::vector<HeapMoment> heap_moments;
  std::unordered_map<int64_t, Stack> stacks;  // of layers, totals and blocks (slices carry their own)
};

ViewerData collect_viewer_data(const TraceFile& trace, const EventFilters& filters, const Report& report,
                               const SliceLimits& limits);

}  // namespace gmt::analysis
