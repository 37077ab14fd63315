// One replay of a device's recorded allocator actions under one setting: either the self-check (the recorded
// settings, each cudaMalloc and map answered by the recording itself, every segment action and block address compared
// to the byte) or a what-if (another setting, "CUDA" modelled by a capacity). The replay stops predicting at the
// first event where its outcome differs from the recording: after it the program may have asked differently.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/read/torch_actions.h"
#include "analysis/replay/torch_caching.h"
#include "analysis/replay/torch_config.h"

namespace gmt::replay {

// Where the actions come from: the trace (TorchActionReader) or, in tests and the benchmark, a vector.
class ActionSource {
 public:
  virtual ~ActionSource() = default;
  virtual bool next(analysis::TorchAction& action) = 0;
};

class VectorActions : public ActionSource {
 public:
  explicit VectorActions(const std::vector<analysis::TorchAction>& actions) : actions_(actions) {}
  bool next(analysis::TorchAction& action) override {
    if (index_ >= actions_.size()) return false;
    action = actions_[index_++];
    return true;
  }

 private:
  const std::vector<analysis::TorchAction>& actions_;
  size_t index_ = 0;
};

class TraceActions : public ActionSource {
 public:
  TraceActions(const analysis::TraceFile& trace, int64_t device) : reader_(trace, device) {}
  bool next(analysis::TorchAction& action) override {
    if (!reader_.step()) return false;
    action = reader_.action();
    return true;
  }

 private:
  analysis::TorchActionReader reader_;
};

enum class ReplayMode { SelfCheck, WhatIf };

// The device total taken when the trace does not name one (it sizes expandable reservations and fraction limits).
inline constexpr uint64_t kUnknownDeviceTotal = uint64_t{80} << 30;

struct ReplayInputs {
  ReplayMode mode = ReplayMode::SelfCheck;
  TorchAllocatorConfig config;                    // in force at the start
  std::map<int64_t, std::string> settings_calls;  // _set_allocator_settings texts by n (v10)
  uint64_t device_total = 0;                      // 0: unknown (expandable reservations then use 80 GiB)
  std::optional<uint64_t> capacity;               // what-if: bytes PyTorch may reserve; nullopt: no limit
  // What-if: events before which the cache was emptied, as the self-check inferred them from older traces that
  // did not record empty_cache() (sorted).
  std::vector<int64_t> empty_cache_before;
  bool stop_at_first_oom = false;  // what-if: only the verdict on the first recorded OOM is wanted (report's use)
  bool keep_held_blocks = false;   // hand back the blocks held at the end (ReplayResult::held_blocks)
};

// The figures of the recording itself (read in the self-check's pass, to the end of the trace).
struct RecordedFigures {
  uint64_t peak_reserved = 0;
  int64_t peak_event_id = 0;
  uint64_t segments_at_peak = 0;     // cudaMalloc'd segments live at the peak (expandable segments: not counted)
  uint64_t peak_live_requested = 0;  // the most requested bytes live at once: any allocator's lower bound
  uint64_t ooms = 0;
  std::optional<int64_t> first_oom_event;
  uint64_t reserved_at_first_oom = 0;
  uint64_t first_oom_request = 0;  // rounded
  std::optional<int64_t> first_oom_device_free;
  bool oom_is_last_request = false;          // the first OOM: no allocation follows it (the program died of it)
  uint64_t live_requested_at_first_oom = 0;  // bytes the program held then: no allocator fits it in less
  uint64_t requests = 0;
  bool memory_fraction_set = false;
  // set_per_process_memory_fraction: the fraction in force at the first OOM (or, without one, the last set), when it
  // is below 1 and so limits what PyTorch may reserve (allowed_memory_maximum), and the event that set it.
  std::optional<double> memory_fraction;
  int64_t memory_fraction_event = 0;
};

struct OomVerdict {
  int64_t event_id = 0;
  uint64_t request = 0;  // rounded
  bool replayed_oom = false;
};

struct ReplayResult {
  uint64_t peak_reserved = 0;
  int64_t peak_event_id = 0;
  uint64_t allocated_at_peak = 0;
  uint64_t inactive_split_at_peak = 0;
  uint64_t segments_at_peak = 0;
  uint64_t peak_allocated = 0;
  uint64_t actions = 0;                     // actions replayed (up to the stop)
  uint64_t requests = 0;                    // allocations and OOMs replayed
  std::optional<int64_t> divergence_event;  // where the replay stopped predicting
  std::string divergence;                   // why, one sentence
  bool avoided_fatal_oom = false;           // a recorded OOM did not happen and nothing followed it
  std::vector<OomVerdict> ooms;             // the recorded OOMs reached
  std::optional<OomVerdict> new_oom;        // what-if: an OOM where the recording allocated
  ReplayStats stats;                        // at the end (or the stop)
  // Self-check only.
  uint64_t segment_actions_matched = 0;
  uint64_t addresses_matched = 0;
  uint64_t unknown_frees = 0;  // frees of blocks the trace never allocated (recorded before the tracker attached)
  std::vector<int64_t> inferred_empty_cache;
  RecordedFigures recorded;
  // With keep_held_blocks, when the replay reached the end of the trace: the blocks the program held then.
  std::vector<CachingAllocatorReplay::HeldBlock> held_blocks;
};

ReplayResult run_replay(ActionSource& source, const ReplayInputs& inputs);

}  // namespace gmt::replay
