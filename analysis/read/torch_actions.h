// PyTorch's caching-allocator actions of one device as the what-if replay reads them (analysis/replay/): blocks,
// segments, OOMs and the allocator calls of schema v10, in the order the allocator made them. The SQL lives here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/read/trace_file.h"

namespace gmt::analysis {

enum class TorchActionKind : uint8_t {
  Alloc,          // a block handed out: address, size = the requested bytes, stream
  FreeRequested,  // v10: the tensor let go; the block returns at its FreeCompleted
  FreeCompleted,  // the block went back to the cache (the events' Free)
  SegmentAlloc,   // cudaMalloc'd segment: address, size
  SegmentFree,
  SegmentMap,  // expandable segments: pages mapped at address, size
  SegmentUnmap,
  Oom,          // OutOfMemoryError: size = the rounded request; value = the device's free bytes (v10), else -1
  EmptyCache,   // v10: torch.cuda.empty_cache()
  SetSettings,  // v10: _set_allocator_settings; value = n of meta torch_alloc_conf_<n>
  SetFraction,  // v10: set_per_process_memory_fraction; value = the bits of the fraction's double
};

struct TorchAction {
  int64_t event_id = 0;
  TorchActionKind kind = TorchActionKind::Alloc;
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t stream = 0;
  int64_t value = 0;
};

// The actions of `device` (and the process-wide calls, device -1) in recording order. step() returns false after
// the last one.
class TorchActionReader {
 public:
  TorchActionReader(const TraceFile& trace, int64_t device);
  bool step();
  const TorchAction& action() const { return action_; }

 private:
  Statement statement_;
  TorchAction action_;
  int schema_version_;
};

// What the replay needs to know about the trace before it starts.
struct TorchReplayFacts {
  std::vector<int64_t> devices;  // devices with tensor blocks, ascending
  bool tensor_blocks = false;    // meta tensor_blocks = 1 and at least one block event
  std::optional<std::string> tensor_blocks_note;
  int64_t dropped_events = 0;             // meta dropped_events + events_lost_at_exit
  int64_t ring_overruns = 0;              // meta tensor_blocks_overruns (v6 drains)
  std::optional<std::string> alloc_conf;  // meta torch_alloc_conf (v10)
  std::optional<std::string> alloc_conf_variable;
  std::optional<std::string> torch_version;
  std::optional<std::string> torch_git_version;
  bool cuda_malloc_async = false;           // the allocator backend was cudaMallocAsync (note, settings or statistics)
  std::optional<int64_t> first_oom_device;  // the device of the first PyTorch OOM, when there is one
};
TorchReplayFacts read_torch_replay_facts(const TraceFile& trace);

// meta torch_alloc_conf_<n>: the settings of the n-th _set_allocator_settings call.
std::optional<std::string> read_settings_call(const TraceFile& trace, int64_t n);

// The latest CUDA-level failed allocation's free device memory (alloc_failures) at or before `event_id`, on `device`:
// for a v9 OOM, whose own event does not carry it.
std::optional<int64_t> cuda_free_before(const TraceFile& trace, int64_t device, int64_t event_id);

}  // namespace gmt::analysis
