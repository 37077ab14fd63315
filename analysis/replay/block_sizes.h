// The real size of every block PyTorch's caching allocator holds at the end of a trace, from the what-if replay's
// self-check. The trace records each tensor block with its requested size (the tracker's orig_size); PyTorch's own
// snapshot (torch.cuda.memory._snapshot(), memory_allocated()) counts the block: rounded (512 B multiples, 512 B at
// least) and, when a free block was handed out whole without a split (large pool: 1 MiB or less would remain, or the
// block is over max_split_size; small pool: less than 512 B would remain), with that unsplit tail. Only the replay of
// the allocator's policy knows which: `report --format memory-viz` asks here (docs/reports.md, "memory-viz").
//
// The sizes are given only where the replay is known to be right: a trace of schema 10 or later (the allocator's
// settings and calls recorded), the native allocator (not cudaMallocAsync), no lost events, and on every device a
// self-check that reproduced every segment action and block address to the byte. Otherwise `why_not` says why.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

#include "analysis/read/trace_file.h"

namespace gmt::replay {

struct ReplayedBlock {
  uint64_t size = 0;       // the block's, as PyTorch's snapshot shows it
  uint64_t requested = 0;  // what the tensor asked for (the trace's size)
  bool pending = false;    // freed, waiting for the streams that used it (PyTorch's "active_pending_free")
};

struct ReplayedBlockSizes {
  bool replayed = false;  // false: no sizes (why_not says why)
  bool has_torch = true;  // false: nothing of PyTorch's allocator in the trace (no blocks, no cudaMallocAsync backend)
  std::string why_not;    // one sentence, without a full stop
  // device -> the block's recorded address -> the block, for every block held at the end of the trace.
  std::map<int64_t, std::unordered_map<uint64_t, ReplayedBlock>> by_device;
  uint64_t actions = 0;  // allocator actions replayed, all devices
};

// Replays every device with tensor blocks (only `device` when given). Throws analysis::TraceError when SQLite cannot
// read the trace.
ReplayedBlockSizes replay_block_sizes(const analysis::TraceFile& trace, std::optional<int64_t> device = std::nullopt);

}  // namespace gmt::replay
