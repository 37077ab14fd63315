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
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/model/filters.h"
#include "analysis/model/lifetimes.h"
#include "analysis/read/stacks.h"
#include "analysis/read/trace_file.h"
#include "analysis/replay/block_sizes.h"

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
  uint64_t size = 0;      // the block's: PyTorch's real size where the replay gave it, else what was requested
  bool allocated = true;  // false: a hole between live blocks ("inactive")
  int64_t stack_id = 0;
  uint64_t requested = 0;  // what was asked for (allocated blocks)
  bool pending = false;    // freed, waiting for the streams that used it ("active_pending_free"; replayed sizes only)
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

  uint64_t allocated_bytes() const;  // blocks in use ("active_allocated"), as PyTorch's allocated_size
  uint64_t active_bytes() const;     // and those pending their streams, as its active_size
  uint64_t requested_bytes() const;  // what the active blocks asked for, as its requested_size
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
  // Where PyTorch's blocks' sizes come from: the replay of its caching allocator (analysis/replay/block_sizes.h:
  // PyTorch's own block sizes), or, without it, the trace's requested sizes; block_sizes_note then says why, when
  // the trace has PyTorch's allocator in it.
  bool block_sizes_replayed = false;
  std::string block_sizes_note;
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

// PyTorch's segments' live blocks get their real sizes from `real` (a replay's, by device and recorded address), the
// holes between them what is left. All or nothing: returns why not (a block the replay does not hold, or holds with
// another request) and leaves the snapshot as it was.
std::optional<std::string> use_real_block_sizes(
    Snapshot& snapshot, const std::map<int64_t, std::unordered_map<uint64_t, replay::ReplayedBlock>>& real);

// The segments live at the end and each device's last actions; PyTorch's blocks with their real sizes where the
// replay can give them (`replay_sizes`), else with their requested sizes.
Snapshot build_snapshot(const TraceFile& trace, const EventFilters& filters,
                        size_t max_entries = kDefaultSnapshotEntries, bool replay_sizes = true);

}  // namespace gmt::analysis
