// A trace as PyTorch's memory snapshot sees an allocator (torch.cuda.memory._snapshot(), read by
// pytorch.org/memory_viz and torch.cuda._memory_viz): the segments live at the end with their blocks, and per device
// the history of actions (segment_alloc, alloc, free_requested, free_completed, segment_free). render_memory_viz
// pickles it; docs/reports.md "memory-viz" says what each field holds.
//
// What a segment is: a heap's segment (PyTorch's, or an NVTX-memory-API heap's), holding that heap's blocks; every
// CUDA-level allocation that backs no heap (a plain CUDA program's cudaMalloc, NCCL's and cuBLAS's buffers beside
// PyTorch's cache, pool allocations, managed memory) is a segment of its own holding one block of its size, so that
// memory_viz shows memory PyTorch's own snapshot cannot see. Host memory (device -1) has no place in a
// per-device snapshot and is counted in `host_lives_left_out`.
//
// Bounded like PyTorch's own history (_record_memory_history(max_entries=...)): each device keeps its last
// `max_entries` actions; the segments are exact at the end whatever was cut, and memory_viz draws what was
// allocated before the first kept action from them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/model/filters.h"
#include "analysis/model/lifetimes.h"
#include "analysis/read/stacks.h"
#include "analysis/read/trace_file.h"

namespace gmt::analysis {

inline constexpr size_t kDefaultSnapshotEntries = 200'000;

enum class SnapshotAction : uint8_t { SegmentAlloc, Alloc, FreeRequested, FreeCompleted, SegmentFree };
const char* to_string(SnapshotAction action);

struct SnapshotEntry {
  SnapshotAction action = SnapshotAction::Alloc;
  uint64_t address = 0;
  uint64_t size = 0;
  int64_t stream = 0;
  int64_t time_ns = 0;  // relative to the process start
  int64_t stack_id = 0;
};

struct SnapshotBlock {
  uint64_t address = 0;
  uint64_t size = 0;
  bool allocated = true;  // false: a hole between live blocks ("inactive")
  int64_t stack_id = 0;
};

struct SnapshotSegment {
  int64_t device = 0;
  uint64_t address = 0;
  uint64_t total_size = 0;
  int64_t stream = 0;
  // "small"/"large" (a heap's segment: PyTorch's pools split at 2 MiB segments), "cuda" (a CUDA-level allocation of
  // its own), "unrecorded" (live blocks whose segment the trace lacks, e.g. made before the tracker attached).
  std::string segment_type;
  int64_t source = 0;  // schema::Source code of what recorded it
  schema::MemoryKind memory_kind = schema::MemoryKind::None;
  int64_t stack_id = 0;
  bool expandable = false;            // PyTorch's expandable segment: its adjacent mapped parts joined
  std::vector<SnapshotBlock> blocks;  // in address order, covering the segment (holes as inactive blocks)

  uint64_t allocated_bytes() const;
};

struct DeviceHistory {
  std::deque<SnapshotEntry> entries;  // the last max_entries actions, oldest first
  uint64_t dropped = 0;               // older actions cut
};

struct Snapshot {
  std::vector<SnapshotSegment> segments;     // by device, then address
  std::map<int64_t, DeviceHistory> devices;  // every device (>= 0) with a segment or an action
  size_t max_entries = kDefaultSnapshotEntries;
  uint64_t host_lives_left_out = 0;      // the app's allocations on device -1 (host memory)
  uint64_t blocks_outside_segments = 0;  // live blocks put in "unrecorded" segments
  int64_t duration_ns = 0;
  std::unordered_map<int64_t, Stack> stacks;  // every stack an entry or a block names (id 0: none taken)
};

// Heaps' segment lives with the adjacent parts mapped into one of PyTorch's expandable segments (api
// torchSegmentMap, one address range grown in place) joined into one life each, as PyTorch's snapshot shows them: a
// block may span two parts. Sorted by device, source and address.
std::vector<Lifetime> join_mapped_parts(std::vector<Lifetime> segments);

// Puts `live` (the live blocks inside the segment) into segment.blocks in address order, with the holes between them
// as blocks that are not allocated, so that the blocks cover the segment; a block overlapping the one before it is
// left out (a damaged trace).
void fill_holes(SnapshotSegment& segment, std::vector<SnapshotBlock> live);

Snapshot build_snapshot(const TraceFile& trace, const EventFilters& filters,
                        size_t max_entries = kDefaultSnapshotEntries);

}  // namespace gmt::analysis
