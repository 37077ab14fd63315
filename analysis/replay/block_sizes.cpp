#include "analysis/replay/block_sizes.h"

#include <fmt/core.h>

#include "analysis/read/torch_actions.h"
#include "analysis/replay/whatif.h"

namespace gmt::replay {
namespace {

// Settings and allocator calls (empty_cache, _set_allocator_settings, the memory fraction) are recorded from v10 on;
// before, the replay assumes the defaults and infers empty_cache() calls, which is good enough for a what-if but not
// for stating a block's size.
constexpr int kFirstSchemaWithSettings = 10;

ReplayedBlockSizes not_replayed(std::string why) {
  ReplayedBlockSizes sizes;
  sizes.why_not = std::move(why);
  return sizes;
}

}  // namespace

ReplayedBlockSizes replay_block_sizes(const analysis::TraceFile& trace, std::optional<int64_t> device) {
  const analysis::TorchReplayFacts facts = analysis::read_torch_replay_facts(trace);
  if (facts.devices.empty() && !facts.cuda_malloc_async) {
    ReplayedBlockSizes sizes = not_replayed("the trace has no PyTorch tensor blocks");
    sizes.has_torch = false;
    return sizes;
  }
  try {
    refuse_unless_replayable(trace, facts);
  } catch (const NotReplayableError& e) {
    return not_replayed(e.what());
  }
  if (trace.schema_version() < kFirstSchemaWithSettings) {
    return not_replayed(fmt::format("the trace was recorded with schema {}, before PyTorch's allocator settings and "
                                    "calls were recorded (v{})",
                                    trace.schema_version(), kFirstSchemaWithSettings));
  }
  if (!facts.alloc_conf) return not_replayed("the trace does not say which allocator settings PyTorch ran with");
  ReplayedBlockSizes sizes;
  for (int64_t ordinal : facts.devices) {
    if (device && ordinal != *device) continue;
    ReplayInputs inputs;
    try {
      inputs = self_check_inputs(trace, facts, ordinal);
    } catch (const analysis::TraceError& e) {
      return not_replayed(e.what());
    }
    inputs.keep_held_blocks = true;
    TraceActions actions(trace, ordinal);
    const ReplayResult self = run_replay(actions, inputs);
    sizes.actions += self.actions;
    if (self.divergence_event) {
      return not_replayed(fmt::format("the replay of PyTorch's allocator on device {} does not reproduce the recording "
                                      "at event {}: {}",
                                      ordinal, *self.divergence_event, self.divergence));
    }
    if (self.unknown_frees > 0) {
      return not_replayed(fmt::format("on device {}, {} blocks were freed that the trace never saw allocated (the "
                                      "recording began after PyTorch had allocated)",
                                      ordinal, self.unknown_frees));
    }
    if (self.peak_reserved != self.recorded.peak_reserved) {
      return not_replayed(fmt::format("the replay of PyTorch's allocator on device {} reaches a peak of {} B reserved, "
                                      "the recording {} B",
                                      ordinal, self.peak_reserved, self.recorded.peak_reserved));
    }
    auto& blocks = sizes.by_device[ordinal];
    for (const CachingAllocatorReplay::HeldBlock& held : self.held_blocks) {
      blocks[held.key] = ReplayedBlock{held.size, held.requested, held.pending};
    }
  }
  sizes.replayed = true;
  return sizes;
}

}  // namespace gmt::replay
