// Blocks that a framework's allocator hands to the app inside memory it holds from CUDA (docs/design.md, "Two
// levels of truth"). PyTorch's caching allocator reports each of its actions to the trace trackers attached to it
// (c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker); our tracker lives in a small bridge built against
// the app's own torch (python/gpumemtrace_inprocess/torch_bridge.cpp) and forwards every action here, on the app's
// thread, while PyTorch's allocator lock is held. So these entry points never take the GIL (they read Python frames
// from the thread's own state, as every stack does), and never wait for the writer: an event the writer cannot
// take in time is dropped and counted (meta dropped_events: the trace is then incomplete), never waited for.
// Exported from the preload library (interpose/exports.map).
#pragma once

#include <stdint.h>

extern "C" {

// PyTorch's TraceEntry actions, numbered by the bridge from their names (so that a torch whose enum order differs
// maps the same way). Stable: the bridge of every torch build uses these values.
enum gmt_torch_action {
  GMT_TORCH_ALLOC = 1,           // a block handed to a tensor: address, size = the bytes requested (orig_size)
  GMT_TORCH_FREE_REQUESTED = 2,  // the tensor let go; the block is reusable only once FREE_COMPLETED
  GMT_TORCH_FREE_COMPLETED = 3,  // the block went back to the cache (after the streams that used it finished)
  GMT_TORCH_SEGMENT_ALLOC = 4,   // the cache took a segment from CUDA (cudaMalloc): address, size
  GMT_TORCH_SEGMENT_FREE = 5,    // ... gave it back (cudaFree: empty_cache, or a retry after an OOM)
  GMT_TORCH_SEGMENT_MAP = 6,     // expandable segments: physical memory mapped at address, size
  GMT_TORCH_SEGMENT_UNMAP = 7,   // ... unmapped
  GMT_TORCH_OOM = 8,             // the allocator raised OutOfMemoryError: size = the rounded request, address =
                                 // the device's free bytes (cudaMemGetInfo), kept in the event's address (v10)
};

// Calls that change the caching allocator (schema v10, for the what-if replay), made by the in-process package
// from Python (torch_tracker.py wraps them), never from inside the allocator. Recorded before the call runs, with
// the caller's stack, as AllocatorCall events.
enum gmt_torch_call {
  GMT_TORCH_EMPTY_CACHE = 1,      // torch.cuda.empty_cache(): every device
  GMT_TORCH_SET_SETTINGS = 2,     // torch.cuda.memory._set_allocator_settings(text)
  GMT_TORCH_MEMORY_FRACTION = 3,  // set_per_process_memory_fraction: value = the bits of the fraction's double
};
void gmt_torch_allocator_call(int call, int device, uint64_t value, const char* text);

// The allocator's settings when the tracker was attached (`conf`: the variable's value, "" when unset; `variable`:
// PYTORCH_ALLOC_CONF or PYTORCH_CUDA_ALLOC_CONF, "" when neither is set) and torch's version: meta torch_alloc_conf,
// torch_alloc_conf_variable, torch_version, torch_git_version (v10).
void gmt_torch_allocator_facts(const char* conf, const char* variable, const char* version, const char* git_version);

// One allocator action (the bridge's tracker calls it). `stream`: the cudaStream_t the block belongs to.
void gmt_torch_allocator_action(int action, int device, uint64_t address, uint64_t size, uint64_t stream);
// The same with the memory pool the block or segment belongs to (TraceEntry::mempool_, in torch 2.11 and earlier): the
// MempoolId_t pair as (first << 32) | (second & 0xffffffff), 0 for the default pools; a CUDA graph's private pool
// (captures) or a torch.cuda.MemPool is not 0. Kept in the event's handle for ALLOC, SEGMENT_ALLOC and SEGMENT_MAP
// (docs/trace-format.md): the what-if replay stops where a private pool begins.
void gmt_torch_allocator_action_in_pool(int action, int device, uint64_t address, uint64_t size, uint64_t stream,
                                        uint64_t pool);

// The in-process package says whether the tracker is attached in this process (attached = 1), or why not
// (attached = 0, `note` one sentence: no compiler, another allocator backend, ...): meta tensor_blocks and
// tensor_blocks_note. A trace without the key had no PyTorch caching allocator to track.
void gmt_torch_blocks_state(int attached, const char* note);

// The interpreter begins to exit (the in-process package's atexit handler, registered when the tracker is
// attached, so it runs before torch's own and after the app's later ones): from here on the frees are the
// interpreter's teardown, not the app letting go, so blocks are no longer recorded. What is alive now is what the
// app held at exit. Sets meta tensor_blocks_end_ns.
void gmt_torch_blocks_stop(void);

// Benchmarks only: pauses (paused != 0) or resumes the recording of blocks alone, CUDA-level hooks still recording
// (bench/torch_step_ab.py). Returns the previous state.
int gmt_set_torch_blocks_paused(int paused);
}
