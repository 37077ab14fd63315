// The calling thread's current driver context and its device, for every hooked event: the driver hooks name the
// context of each call, and every hook names the device it ran on. A CUDA runtime call operates on the driver
// context current to the calling thread ("Interactions with the CUDA Driver API" in the CUDA Runtime API
// reference), so that context's device is also where a cudart call allocated.
#pragma once

#include <cstdint>

namespace gmt::interpose {

// The calling thread's current context (cuCtxGetCurrent) as a number; 0: none, or no driver in this process.
uint64_t current_context();

// The device of `context`, the calling thread's current one (current_context()); -1 when there is none or the
// driver cannot say. Asked of the driver once per context and thread: a context's device never changes, and the
// answers kept are dropped whenever a context may have been destroyed (ContextDestruction).
int16_t device_of_current_context(uint64_t context);

// Around every call that can destroy a context (the driver hooks' wrappers of cuCtxDestroy and the primary
// context's release and reset): a destroyed context's address can be reused by another context on another
// device.
class ContextDestruction {
 public:
  ContextDestruction();
  ~ContextDestruction();
  ContextDestruction(const ContextDestruction&) = delete;
  ContextDestruction& operator=(const ContextDestruction&) = delete;
};

}  // namespace gmt::interpose
