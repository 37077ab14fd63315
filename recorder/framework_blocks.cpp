// A framework allocator's actions (recorder/framework_blocks.h) as events: blocks as allocations and frees of
// memory kind TensorBlock, segments as SegmentAlloc / SegmentFree, an out-of-memory error as a failed allocation,
// all of source TorchAllocator. The block's stack (native frames and the thread's Python frames) is taken here,
// as for a cudaMalloc: its innermost frames are the allocator's, its Python frames name the app's line.
#include "recorder/framework_blocks.h"

#include <atomic>
#include <string>

#include "recorder/block_stack_sample.h"
#include "recorder/cache_hints.h"
#include "recorder/guard.h"
#include "recorder/recorder.h"
#include "recorder/settings.h"
#include "schema/trace_schema.h"

namespace gmt::recorder {
namespace {

std::atomic<bool> g_blocks_stopped{false};  // gmt_torch_blocks_stop
// The benchmark control gmt_set_torch_blocks_paused: PyTorch still calls the tracker, which returns at once, while
// every CUDA-level hook records (bench/torch_step_ab.py measures block tracking's own cost with it).
std::atomic<bool> g_blocks_paused{false};
std::atomic<int64_t> g_settings_calls{0};  // n of meta torch_alloc_conf_<n>

// PyTorch's free() reports FREE_REQUESTED and, unless other streams still use the block, FREE_COMPLETED right after
// it, under the same lock. Only a FREE_REQUESTED whose completion does not follow at once is worth an event (the
// block waits for other streams): each device's last FREE_REQUESTED is held until that device's next action shows
// which it was, and a deferred one is recorded then, before that action (the replay only needs it before the
// block's completion, which comes later still). One left pending when the device makes no further allocator action
// is lost.
//
// An allocator call (empty_cache(), a settings change; gmt_torch_allocator_call) records every held request before
// its own event: emptyCache completes the blocks that waited (synchronize_and_free_events) before it frees segments,
// so a held request's completion may be the very next action although the request came before the call; dropped
// then, the replay would see the block freed inside emptyCache without ever having been let go (gpu.whatif's fuzz,
// seed 3, 2026-12-07). The actions touch a device's slot under that device's allocator lock; the call comes from
// Python without it, so a slot is claimed by whichever side moves its state off "held" first (one compare-and-swap
// per free, only while a request is held), and its fields are read before the claim and trusted only if the claim
// succeeds: a new request changes the state's count.
struct PendingFreeRequest {
  // Bit 0: a request is held. The bits above: how many requests this slot has held, so that a claim made with
  // fields read under one request fails once another has replaced it.
  std::atomic<uint64_t> state{0};
  // Atomics only so that the call's reads beside a new request's writes are defined; their order comes from state.
  std::atomic<uint64_t> address{0}, size{0}, stream{0};
};
constexpr int kHeldDevices = 64;  // devices beyond record every FREE_REQUESTED
PendingFreeRequest g_free_requests[kHeldDevices];

struct HeldRequest {
  bool claimed = false;
  uint64_t address = 0, size = 0, stream = 0;
};

// Takes the slot's held request, if there is one and nobody took it first.
GMT_HOT HeldRequest claim_held_request(PendingFreeRequest& slot) {
  uint64_t state = slot.state.load(std::memory_order_acquire);
  if ((state & 1) == 0) return {};
  HeldRequest request{true, slot.address.load(std::memory_order_relaxed), slot.size.load(std::memory_order_relaxed),
                      slot.stream.load(std::memory_order_relaxed)};
  if (!slot.state.compare_exchange_strong(state, state & ~uint64_t{1}, std::memory_order_acq_rel)) return {};
  return request;
}

// Only under the device's allocator lock (an action), after its held request was claimed.
GMT_HOT void hold_request(PendingFreeRequest& slot, uint64_t address, uint64_t size, uint64_t stream) {
  const uint64_t state = slot.state.load(std::memory_order_relaxed);
  slot.address.store(address, std::memory_order_relaxed);
  slot.size.store(size, std::memory_order_relaxed);
  slot.stream.store(stream, std::memory_order_relaxed);
  slot.state.store(((state >> 1) + 1) << 1 | 1, std::memory_order_release);
}

using schema::Api;
using schema::EventKind;

GMT_HOT EventRecord block_event(uint64_t time_ns, EventKind kind, Api api, int device, uint64_t address, uint64_t size,
                                uint64_t stream) {
  EventRecord e;
  e.time_ns = time_ns;
  e.thread_id = current_thread_id();
  e.kind = kind;
  e.api = api;
  e.source = schema::Source::TorchAllocator;
  e.memory_kind = schema::MemoryKind::TensorBlock;
  e.device = static_cast<int16_t>(device);
  e.call.address = address;
  e.call.size = size;
  e.call.stream = stream;
  return e;
}

// A claimed request as its event, with the time its claimer read (see the callers for where).
GMT_HOT void record_held_request(uint64_t time_ns, int device, const HeldRequest& request) {
  EventRecord e = block_event(time_ns, EventKind::FreeRequested, Api::torchBlockFreeRequested, device, request.address,
                              request.size, request.stream);
  record(e, /*take_stack=*/false);
}

}  // namespace
}  // namespace gmt::recorder

extern "C" __attribute__((visibility("default"))) GMT_HOT void gmt_torch_allocator_action(int action, int device,
                                                                                          uint64_t address,
                                                                                          uint64_t size,
                                                                                          uint64_t stream) {
  gmt_torch_allocator_action_in_pool(action, device, address, size, stream, 0);
}

extern "C" __attribute__((visibility("default"))) GMT_HOT void gmt_torch_allocator_action_in_pool(
    int action, int device, uint64_t address, uint64_t size, uint64_t stream, uint64_t pool) {
  using namespace gmt::recorder;
  HookScope scope;  // CUDA calls made meanwhile (none expected) are not the app's
  if (!scope.active() || g_blocks_stopped.load(std::memory_order_relaxed) ||
      g_blocks_paused.load(std::memory_order_relaxed)) {
    return;
  }
  NeverWaitScope never_wait;  // PyTorch's allocator lock is held: drop and count rather than wait
  const bool held_device = device >= 0 && device < kHeldDevices;
  // The usual free's first half: nothing held on the device (only its own actions hold one), so nothing to record
  // and no clock to read.
  if (held_device && action == GMT_TORCH_FREE_REQUESTED &&
      (g_free_requests[device].state.load(std::memory_order_relaxed) & 1) == 0) {
    return hold_request(g_free_requests[device], address, size, stream);
  }
  // The time of this action's events, read after the slot was seen and before it is claimed, so that the trace
  // orders this action and a concurrent call as they met at the slot: a request claimed here comes before the
  // call's event (the call reads its clock after it found the slot claimed), and where the call claimed the request
  // first (reading its clock before its claim), this action, seeing the slot no longer held, reads a later time.
  PendingFreeRequest* slot = held_device ? &g_free_requests[device] : nullptr;
  const bool seen_held = slot && (slot->state.load(std::memory_order_acquire) & 1) != 0;
  uint64_t now = now_ns();
  if (seen_held) {
    const HeldRequest request = claim_held_request(*slot);
    if (!request.claimed) now = now_ns();  // a call took it meanwhile, with an earlier time
    if (request.claimed && (action != GMT_TORCH_FREE_COMPLETED || address != request.address)) {
      record_held_request(now, device, request);
    }
  }
  switch (action) {
    case GMT_TORCH_FREE_REQUESTED: {
      if (held_device) return hold_request(g_free_requests[device], address, size, stream);
      EventRecord e =
          block_event(now, EventKind::FreeRequested, Api::torchBlockFreeRequested, device, address, size, stream);
      return record(e, /*take_stack=*/false);
    }
    case GMT_TORCH_ALLOC: {
      EventRecord e = block_event(now, EventKind::Alloc, Api::torchBlockAlloc, device, address, size, stream);
      e.call.handle = pool;
      return record(e, /*take_stack=*/take_block_stack(size));
    }
    case GMT_TORCH_FREE_COMPLETED: {
      EventRecord e = block_event(now, EventKind::Free, Api::torchBlockFree, device, address, 0, stream);
      return record(e, settings().take_free_stacks);
    }
    case GMT_TORCH_SEGMENT_ALLOC:
    case GMT_TORCH_SEGMENT_MAP: {
      const Api api = action == GMT_TORCH_SEGMENT_ALLOC ? Api::torchSegmentAlloc : Api::torchSegmentMap;
      EventRecord e = block_event(now, EventKind::SegmentAlloc, api, device, address, size, stream);
      e.call.handle = pool;
      return record(e, /*take_stack=*/false);  // the CUDA-level allocation just before it has the stack
    }
    case GMT_TORCH_SEGMENT_FREE:
    case GMT_TORCH_SEGMENT_UNMAP: {
      const Api api = action == GMT_TORCH_SEGMENT_FREE ? Api::torchSegmentFree : Api::torchSegmentUnmap;
      EventRecord e = block_event(now, EventKind::SegmentFree, api, device, address, size, stream);
      return record(e, /*take_stack=*/false);
    }
    case GMT_TORCH_OOM: {
      // The request that failed, at the line that asked. `address` is what the device said was free; the
      // CUDA-level failure (if the allocator got as far as cudaMalloc) has the device's figures.
      EventRecord e = block_event(now, EventKind::AllocFailed, Api::torchBlockAlloc, device, address, size, stream);
      e.call.error = kOutOfMemoryError;
      return record(e, /*take_stack=*/true);
    }
    default: return;  // SNAPSHOT and actions of later torch versions
  }
}

extern "C" __attribute__((visibility("default"))) void gmt_torch_allocator_call(int call, int device, uint64_t value,
                                                                                const char* text) {
  using namespace gmt::recorder;
  HookScope scope;
  if (!scope.active() || g_blocks_stopped.load(std::memory_order_relaxed)) return;
  Api api;
  uint64_t size = 0;
  uint64_t handle = 0;
  switch (call) {
    case GMT_TORCH_EMPTY_CACHE:
      api = Api::torchEmptyCache;
      device = -1;
      break;
    case GMT_TORCH_SET_SETTINGS: {
      api = Api::torchSetAllocatorSettings;
      device = -1;
      handle = static_cast<uint64_t>(g_settings_calls.fetch_add(1, std::memory_order_relaxed));
      set_meta_later(gmt::schema::meta::kTorchAllocConfCallPrefix + std::to_string(handle), text ? text : "");
      break;
    }
    case GMT_TORCH_MEMORY_FRACTION:
      api = Api::torchSetMemoryFraction;
      size = value;
      break;
    default: return;
  }
  // Every device's held request first: it came before this call (see PendingFreeRequest).
  for (int held = 0; held < kHeldDevices; ++held) {
    PendingFreeRequest& slot = g_free_requests[held];
    if ((slot.state.load(std::memory_order_acquire) & 1) == 0) continue;
    // Its time is read before the claim: a completion that another thread records for the block after finding
    // nothing to claim reads its clock later, so the trace never has the completion first.
    const uint64_t time_ns = now_ns();
    const HeldRequest request = claim_held_request(slot);
    if (request.claimed) record_held_request(time_ns, held, request);
  }
  EventRecord e = block_event(now_ns(), EventKind::AllocatorCall, api, device, 0, size, 0);
  e.memory_kind = gmt::schema::MemoryKind::None;
  e.call.handle = handle;
  record(e, /*take_stack=*/true);
}

extern "C" __attribute__((visibility("default"))) void gmt_torch_allocator_facts(const char* conf, const char* variable,
                                                                                 const char* version,
                                                                                 const char* git_version) {
  using namespace gmt::recorder;
  namespace meta = gmt::schema::meta;
  HookScope scope;
  set_meta_later(meta::kTorchAllocConf, conf ? conf : "");
  if (variable && *variable) set_meta_later(meta::kTorchAllocConfVariable, variable);
  if (version && *version) set_meta_later(meta::kTorchVersion, version);
  if (git_version && *git_version) set_meta_later(meta::kTorchGitVersion, git_version);
}

extern "C" __attribute__((visibility("default"))) void gmt_torch_blocks_state(int attached, const char* note) {
  using namespace gmt::recorder;
  namespace meta = gmt::schema::meta;
  HookScope scope;
  set_meta_later(meta::kTensorBlocks, attached ? "1" : "0");
  if (note != nullptr && *note != '\0') set_meta_later(meta::kTensorBlocksNote, note);
}

extern "C" __attribute__((visibility("default"))) void gmt_torch_blocks_stop(void) {
  using namespace gmt::recorder;
  HookScope scope;
  g_blocks_stopped.store(true, std::memory_order_relaxed);
  set_meta_later(gmt::schema::meta::kTensorBlocksEndNs, std::to_string(now_ns()));
}

// Benchmarks only (like gmt_set_recording_paused, recorder/pause.cpp): pauses (paused != 0) or resumes the recording
// of PyTorch's blocks alone; returns the previous state. Blocks freed while paused stay live in the trace.
extern "C" __attribute__((visibility("default"))) int gmt_set_torch_blocks_paused(int paused) {
  return gmt::recorder::g_blocks_paused.exchange(paused != 0, std::memory_order_relaxed) ? 1 : 0;
}
