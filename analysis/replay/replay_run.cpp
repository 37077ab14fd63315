#include "analysis/replay/replay_run.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <unordered_map>

namespace gmt::replay {
namespace {

using analysis::TorchAction;
using analysis::TorchActionKind;

// Keys for OOM requests, which no free names: above any user-space address.
constexpr uint64_t kOomKeyBase = uint64_t{1} << 63;

std::string describe(const TorchAction& a) {
  switch (a.kind) {
    case TorchActionKind::SegmentAlloc: return fmt::format("segment_alloc {:#x} ({} B)", a.address, a.size);
    case TorchActionKind::SegmentFree: return fmt::format("segment_free {:#x} ({} B)", a.address, a.size);
    case TorchActionKind::SegmentMap: return fmt::format("segment_map {:#x} ({} B)", a.address, a.size);
    case TorchActionKind::SegmentUnmap: return fmt::format("segment_unmap {:#x} ({} B)", a.address, a.size);
    default: return fmt::format("event {}", a.event_id);
  }
}

// A SetFraction action's fraction: the bits of the double, as recorded.
double fraction_of(const TorchAction& a) {
  double fraction = 0;
  static_assert(sizeof(fraction) == sizeof(a.value));
  std::memcpy(&fraction, &a.value, sizeof(fraction));
  return fraction;
}

// A block or segment of a memory pool other than the defaults (the event's handle: recorder/framework_blocks.h):
// a CUDA graph's private pool during a capture, or a torch.cuda.MemPool. The replay has only the default pools, so
// it stops there; traces recorded before pools were (2026-12-06) have 0 everywhere.
bool in_private_pool(const TorchAction& a) {
  return (a.kind == TorchActionKind::Alloc || a.kind == TorchActionKind::SegmentAlloc ||
          a.kind == TorchActionKind::SegmentMap) &&
         a.value != 0;
}

// PyTorch's MempoolId_t as the recorder packs it: (first << 32) | second.
std::string describe_pool(uint64_t pool) { return fmt::format("({}, {})", pool >> 32, pool & 0xffffffffu); }

bool is_segment_action(TorchActionKind kind) {
  return kind == TorchActionKind::SegmentAlloc || kind == TorchActionKind::SegmentFree ||
         kind == TorchActionKind::SegmentMap || kind == TorchActionKind::SegmentUnmap;
}

// The self-check's CUDA: each call is answered by the recorded segment actions of the request being replayed (they
// precede its alloc or OOM event in the trace). A cudaMalloc succeeds when the recording's next action is that
// segment, and failed when the recording went on to free segments (the retry chain) or to the OOM; anything else is
// a divergence, the first of which is kept.
//
// The effects may also hold free_completed actions recorded between a request's segment actions: the blocks that
// waited for other streams and that synchronize_and_free_events returned to the pool inside the out-of-memory
// chain's release_cached_blocks (after a garbage collection or release_available_cached_blocks freed segments). A
// block that did not wait is never returned there: its free_completed after segment frees follows an empty_cache()
// that the trace did not record. The replay's own synchronize_and_free_events
// completes every pending block there, so they are only set aside here (skip_completions), and applied after the
// request (then a no-op for the blocks the replay completed itself).
class RecordedMemory : public DeviceMemory {
 public:
  std::deque<TorchAction> effects;
  std::vector<uint64_t> completions;  // block addresses of the free_completed set aside
  bool request_is_oom = false;
  std::optional<std::string> divergence;
  uint64_t matched = 0;

  // Moves the free_completed at the front of the effects to `completions`; true when a segment action is left.
  bool skip_completions() {
    while (!effects.empty() && effects.front().kind == TorchActionKind::FreeCompleted) {
      completions.push_back(effects.front().address);
      effects.pop_front();
    }
    return !effects.empty();
  }

  std::optional<uint64_t> malloc(uint64_t size, uint64_t) override {
    if (!skip_completions()) {
      if (!request_is_oom)
        diverge(fmt::format("the replay needs a new {} B segment; the recording reused its cache", size));
      return std::nullopt;
    }
    const TorchAction& next = effects.front();
    if (next.kind == TorchActionKind::SegmentAlloc) {
      if (next.size != size) {
        diverge(fmt::format("the replay asks cudaMalloc for {} B; the recording made {}", size, describe(next)));
        return std::nullopt;
      }
      const uint64_t address = next.address;
      pop();
      return address;
    }
    if (next.kind == TorchActionKind::SegmentMap) {
      diverge(fmt::format("the replay asks cudaMalloc for {} B; the recording made {}", size, describe(next)));
    }
    return std::nullopt;  // the recording went on to release cached segments: this cudaMalloc failed
  }
  void free(uint64_t address, uint64_t size, uint64_t) override { expect(TorchActionKind::SegmentFree, address, size); }
  uint64_t reserve(uint64_t size, uint64_t) override {
    if (skip_completions() && effects.front().kind == TorchActionKind::SegmentMap) return effects.front().address;
    if (!request_is_oom)
      diverge(fmt::format("the replay reserves a new {} B expandable segment; the recording did not map one", size));
    return next_unrecorded_++ * (uint64_t{1} << 48);
  }
  void release_reservation(uint64_t, uint64_t) override {}
  bool map(uint64_t address, uint64_t size, uint64_t) override {
    if (skip_completions() && effects.front().kind == TorchActionKind::SegmentMap) {
      if (effects.front().address != address || effects.front().size != size) {
        diverge(fmt::format("the replay maps {} B at {:#x}; the recording made {}", size, address,
                            describe(effects.front())));
        return false;
      }
      pop();
      return true;
    }
    if (effects.empty() && !request_is_oom) {
      diverge(fmt::format("the replay maps {} B at {:#x}; the recording mapped nothing", size, address));
    } else if (!effects.empty() && effects.front().kind == TorchActionKind::SegmentAlloc) {
      diverge(fmt::format("the replay maps {} B at {:#x}; the recording made {}", size, address,
                          describe(effects.front())));
    }
    return false;
  }
  void unmap(uint64_t address, uint64_t size, uint64_t) override {
    expect(TorchActionKind::SegmentUnmap, address, size);
  }

  void diverge(std::string why) {
    if (!divergence) divergence = std::move(why);
  }

 private:
  void pop() {
    effects.pop_front();
    ++matched;
  }
  void expect(TorchActionKind kind, uint64_t address, uint64_t size) {
    const char* verb = kind == TorchActionKind::SegmentFree ? "frees the segment" : "unmaps";
    if (!skip_completions()) {
      diverge(fmt::format("the replay {} {:#x} ({} B); the recording did not", verb, address, size));
    } else if (effects.front().kind != kind || effects.front().address != address || effects.front().size != size) {
      diverge(fmt::format("the replay {} {:#x} ({} B); the recording made {}", verb, address, size,
                          describe(effects.front())));
    } else {
      pop();
    }
  }
  uint64_t next_unrecorded_ = 1;
};

// A what-if's CUDA: memory succeeds while the reserved bytes stay within the capacity; addresses are handed out
// upwards (they decide only ties between equal-size free blocks of one stream).
class ModelledMemory : public DeviceMemory {
 public:
  explicit ModelledMemory(std::optional<uint64_t> capacity) : capacity_(capacity) {}
  std::optional<uint64_t> malloc(uint64_t size, uint64_t) override {
    if (!fits(size)) return std::nullopt;
    used_ += size;
    const uint64_t address = next_;
    next_ += (size + kSmallBuffer - 1) / kSmallBuffer * kSmallBuffer;
    return address;
  }
  void free(uint64_t, uint64_t size, uint64_t) override { used_ -= size; }
  uint64_t reserve(uint64_t size, uint64_t) override {
    const uint64_t address = next_;
    next_ += (size + kSmallBuffer - 1) / kSmallBuffer * kSmallBuffer;
    return address;
  }
  void release_reservation(uint64_t, uint64_t) override {}
  bool map(uint64_t, uint64_t size, uint64_t) override {
    if (!fits(size)) return false;
    used_ += size;
    return true;
  }
  void unmap(uint64_t, uint64_t size, uint64_t) override { used_ -= size; }

 private:
  bool fits(uint64_t size) const { return !capacity_ || used_ + size <= *capacity_; }
  std::optional<uint64_t> capacity_;
  uint64_t used_ = 0;
  uint64_t next_ = uint64_t{0x7f0000000000};
};

class Replay {
 public:
  Replay(ActionSource& source, const ReplayInputs& inputs)
      : source_(source),
        inputs_(inputs),
        self_check_(inputs.mode == ReplayMode::SelfCheck),
        modelled_(inputs.capacity),
        engine_(inputs.config, self_check_ ? static_cast<DeviceMemory&>(recorded_) : modelled_,
                inputs.device_total ? inputs.device_total : kUnknownDeviceTotal),
        config_(inputs.config) {}

  ReplayResult run() {
    TorchAction action;
    while (source_.next(action)) {
      if (self_check_) record(action);
      if (stopped_) {
        if (!self_check_) break;  // the recorded figures are the self-check's: a what-if stops reading here
        continue;
      }
      if (in_private_pool(action)) {
        stop(action.event_id, fmt::format("CUDA-graph private pools are not modelled: from event {}, the first {} "
                                          "of memory pool {}",
                                          action.event_id, action.kind == TorchActionKind::Alloc ? "block" : "segment",
                                          describe_pool(static_cast<uint64_t>(action.value))));
        if (!self_check_) break;
        continue;
      }
      if (is_segment_action(action.kind)) {
        if (self_check_) recorded_.effects.push_back(action);
        continue;
      }
      ++result_.actions;
      if (self_check_ && action.kind == TorchActionKind::FreeCompleted && !recorded_.effects.empty() &&
          engine_.is_pending(action.address)) {
        recorded_.effects.push_back(action);  // inside a request's out-of-memory chain (RecordedMemory)
        continue;
      }
      request(action);
    }
    if (self_check_ && !stopped_) {
      if (pending_empty_cache_ || recorded_.skip_completions()) {
        // Segment frees at the end of the trace, after the last request: a recorded empty_cache() or an inferred one.
        const bool recorded_call = pending_empty_cache_ || recorded_.effects.empty();
        empty_cache_from_recording(recorded_call ? 0 : recorded_.effects.front().event_id, false);
        if (recorded_.divergence) stop(last_event_, *recorded_.divergence);
      }
      apply_completions();
    }
    result_.stats = engine_.stats();
    result_.segment_actions_matched = recorded_.matched;
    if (inputs_.keep_held_blocks && !stopped_) result_.held_blocks = engine_.held_blocks();
    return std::move(result_);
  }

 private:
  // The recording's own figures, from every action to the end of the trace.
  void record(const TorchAction& a) {
    RecordedFigures& r = result_.recorded;
    last_event_ = a.event_id;
    switch (a.kind) {
      case TorchActionKind::SegmentAlloc:
      case TorchActionKind::SegmentMap:
        recorded_reserved_ += a.size;
        if (a.kind == TorchActionKind::SegmentAlloc) ++recorded_segments_;
        if (recorded_reserved_ > r.peak_reserved) {
          r.peak_reserved = recorded_reserved_;
          r.peak_event_id = a.event_id;
          r.segments_at_peak = recorded_segments_;
        }
        break;
      case TorchActionKind::SegmentFree:
      case TorchActionKind::SegmentUnmap:
        recorded_reserved_ -= std::min(recorded_reserved_, a.size);
        if (a.kind == TorchActionKind::SegmentFree && recorded_segments_ > 0) --recorded_segments_;
        break;
      case TorchActionKind::Alloc:
        ++r.requests;
        r.oom_is_last_request = false;
        live_requested_ += a.size;
        requested_by_address_[a.address] = a.size;
        r.peak_live_requested = std::max(r.peak_live_requested, live_requested_);
        break;
      case TorchActionKind::FreeRequested:
      case TorchActionKind::FreeCompleted: {
        auto it = requested_by_address_.find(a.address);
        if (it != requested_by_address_.end()) {
          live_requested_ -= it->second;
          requested_by_address_.erase(it);
        }
        break;
      }
      case TorchActionKind::Oom:
        ++r.requests;
        ++r.ooms;
        if (!r.first_oom_event) {
          r.first_oom_event = a.event_id;
          r.reserved_at_first_oom = recorded_reserved_;
          r.first_oom_request = a.size;
          r.live_requested_at_first_oom = live_requested_;
          if (a.value >= 0) r.first_oom_device_free = a.value;
          r.oom_is_last_request = true;
        }
        break;
      case TorchActionKind::SetFraction:
        r.memory_fraction_set = true;
        if (!r.first_oom_event) {  // the one in force at the first OOM stays
          const double fraction = fraction_of(a);
          r.memory_fraction = fraction < 1.0 ? std::optional<double>(fraction) : std::nullopt;
          r.memory_fraction_event = a.event_id;
        }
        break;
      default: break;
    }
  }

  void request(const TorchAction& a) {
    if (self_check_) {
      if (pending_empty_cache_ && a.kind == TorchActionKind::FreeCompleted && recorded_.effects.empty() &&
          engine_.is_pending(a.address)) {
        // emptyCache -> release_cached_blocks -> synchronize_and_free_events: the blocks that waited for other
        // streams return to the pool (FREE_COMPLETED) before release_blocks frees the segments. A block that did
        // not wait was freed after the call (the recording shows no segment of it freed there).
        if (!engine_.free_completed(a.address)) ++result_.unknown_frees;
        return;
      }
      settle_recorded_effects(a);
      if (stopped_) return;
    } else {
      while (next_empty_cache_ < inputs_.empty_cache_before.size() &&
             inputs_.empty_cache_before[next_empty_cache_] <= a.event_id) {
        if (inputs_.empty_cache_before[next_empty_cache_] == a.event_id) engine_.empty_cache();
        ++next_empty_cache_;
      }
    }
    switch (a.kind) {
      case TorchActionKind::Alloc: allocate(a); break;
      case TorchActionKind::Oom: out_of_memory(a); break;
      case TorchActionKind::FreeRequested:
        if (!engine_.free_requested(a.address)) ++result_.unknown_frees;
        break;
      case TorchActionKind::FreeCompleted:
        if (!engine_.free_completed(a.address)) ++result_.unknown_frees;
        break;
      case TorchActionKind::EmptyCache:
        if (self_check_) {
          pending_empty_cache_ = true;  // its segment actions follow it
        } else {
          engine_.empty_cache();
        }
        break;
      case TorchActionKind::SetSettings: {
        auto it = inputs_.settings_calls.find(a.value);
        if (it == inputs_.settings_calls.end())
          return stop(a.event_id, "the settings of a _set_allocator_settings call are missing");
        if (std::optional<std::string> error = apply_alloc_conf(it->second, config_)) {
          return stop(a.event_id, "PyTorch would refuse the settings '" + it->second + "': " + *error);
        }
        engine_.set_config(config_);
        break;
      }
      case TorchActionKind::SetFraction: engine_.set_memory_fraction(fraction_of(a)); break;
      default: break;
    }
    if (self_check_) apply_completions();
    note_peak(a.event_id);
  }

  // The free_completed set aside while the request's segment actions were matched (RecordedMemory).
  void apply_completions() {
    for (uint64_t address : recorded_.completions) {
      if (!engine_.free_completed(address)) ++result_.unknown_frees;
    }
    recorded_.completions.clear();
  }

  // Self-check: the recorded segment actions gathered before this request. Those of an empty_cache() marker are
  // its own; frees before anything but an allocation that needs new memory are an empty_cache() that an older trace
  // did not mark (inferred: the what-ifs empty their cache there too); the rest are this request's.
  void settle_recorded_effects(const TorchAction& a) {
    std::deque<TorchAction>& effects = recorded_.effects;
    const bool is_request = a.kind == TorchActionKind::Alloc || a.kind == TorchActionKind::Oom;
    if (pending_empty_cache_) {
      empty_cache_from_recording(0, is_request);
    } else if (recorded_.skip_completions() && (effects.front().kind == TorchActionKind::SegmentFree ||
                                                effects.front().kind == TorchActionKind::SegmentUnmap)) {
      const bool chain_frees = a.kind == TorchActionKind::Oom ||
                               (a.kind == TorchActionKind::Alloc && !engine_.would_reuse(a.size, a.stream));
      if (!chain_frees) empty_cache_from_recording(a.event_id, is_request);
    }
    if (recorded_.divergence) return stop(a.event_id, *recorded_.divergence);
    if (!is_request && recorded_.skip_completions()) {
      stop(a.event_id, "the recording has " + describe(effects.front()) + " here, which the replay does not make");
    }
  }

  // The cache emptied (recorded or inferred) against the recorded segment actions. A segment allocated or mapped
  // after them belongs to the request that follows (a request the emptied cache no longer holds a block for); any
  // other action left over is one the replay's emptyCache did not make.
  void empty_cache_from_recording(int64_t inferred_before, bool request_follows) {
    pending_empty_cache_ = false;
    if (inferred_before != 0) result_.inferred_empty_cache.push_back(inferred_before);
    recorded_.request_is_oom = false;
    engine_.empty_cache();
    if (recorded_.skip_completions()) {
      const TorchActionKind left = recorded_.effects.front().kind;
      const bool new_memory = left == TorchActionKind::SegmentAlloc || left == TorchActionKind::SegmentMap;
      if (!request_follows || !new_memory) {
        recorded_.diverge("after an empty_cache(), the recording has " + describe(recorded_.effects.front()) +
                          ", which the replay does not make");
      }
    }
  }

  void allocate(const TorchAction& a) {
    ++result_.requests;
    recorded_.request_is_oom = false;
    CachingAllocatorReplay::Allocation got = engine_.malloc(a.address, a.size, a.stream);
    if (self_check_) {
      if (recorded_.divergence) return stop(a.event_id, *recorded_.divergence);
      if (!got.ok)
        return stop(a.event_id, fmt::format("the replay runs out of memory for {} B; the recording allocated", a.size));
      if (got.address != a.address) {
        return stop(a.event_id, fmt::format("the replay places the {} B block at {:#x}; the recording at {:#x}", a.size,
                                            got.address, a.address));
      }
      if (recorded_.skip_completions()) {
        return stop(a.event_id, "the recording also made " + describe(recorded_.effects.front()) +
                                    " for this allocation, which the replay does not");
      }
      ++result_.addresses_matched;
      return;
    }
    if (!got.ok) {
      result_.new_oom = OomVerdict{a.event_id, got.rounded, true};
      stop(a.event_id, fmt::format("runs out of memory at this allocation of {} B, which the recording made", a.size));
    }
  }

  void out_of_memory(const TorchAction& a) {
    ++result_.requests;
    recorded_.request_is_oom = true;
    CachingAllocatorReplay::Allocation got = engine_.malloc(kOomKeyBase + result_.ooms.size(), a.size, a.stream);
    result_.ooms.push_back(OomVerdict{a.event_id, got.rounded, !got.ok});
    if (self_check_) {
      if (recorded_.divergence) return stop(a.event_id, *recorded_.divergence);
      if (got.ok) return stop(a.event_id, "the replay allocates where the recording ran out of memory");
      if (got.rounded != a.size) {
        return stop(a.event_id,
                    fmt::format("the replay's OOM is for {} B; the recording's for {} B", got.rounded, a.size));
      }
      if (recorded_.skip_completions()) {
        return stop(a.event_id, "the recording also made " + describe(recorded_.effects.front()) + " before the OOM");
      }
      return;
    }
    if (!got.ok && inputs_.stop_at_first_oom) return stop(a.event_id, "stopped at the first recorded OOM, as asked");
    if (got.ok) {
      // Avoided: if the program allocated nothing after it, the OOM ended the run and this is where the trace ends.
      TorchAction later;
      bool more_requests = false;
      while (!more_requests && source_.next(later)) more_requests = later.kind == TorchActionKind::Alloc;
      result_.avoided_fatal_oom = !more_requests;
      stop(a.event_id, more_requests ? "no OOM at this request, where the program caught the recorded one and went on"
                                     : "no OOM at this request; the trace ends here");
    }
  }

  void note_peak(int64_t event_id) {
    const ReplayStats& s = engine_.stats();
    result_.peak_allocated = std::max(result_.peak_allocated, s.allocated);
    if (s.reserved > result_.peak_reserved) {
      result_.peak_reserved = s.reserved;
      result_.peak_event_id = event_id;
      result_.allocated_at_peak = s.allocated;
      result_.inactive_split_at_peak = s.inactive_split;
      result_.segments_at_peak = s.segments;
    }
  }

  void stop(int64_t event_id, std::string why) {
    if (stopped_) return;
    stopped_ = true;
    result_.divergence_event = event_id;
    result_.divergence = std::move(why);
  }

  ActionSource& source_;
  const ReplayInputs& inputs_;
  const bool self_check_;
  RecordedMemory recorded_;
  ModelledMemory modelled_;
  CachingAllocatorReplay engine_;
  TorchAllocatorConfig config_;
  ReplayResult result_;
  bool stopped_ = false;
  bool pending_empty_cache_ = false;
  size_t next_empty_cache_ = 0;
  int64_t last_event_ = 0;
  uint64_t recorded_reserved_ = 0;
  uint64_t recorded_segments_ = 0;
  uint64_t live_requested_ = 0;
  std::unordered_map<uint64_t, uint64_t> requested_by_address_;
};

}  // namespace

ReplayResult run_replay(ActionSource& source, const ReplayInputs& inputs) { return Replay(source, inputs).run(); }

}  // namespace gmt::replay
