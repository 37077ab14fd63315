// The app's stack, taken in a runtime hook before the CUDA call runs, for the events recorded inside that call.
//
// Why: under a driver-level backend the allocation is recorded deep inside the CUDA libraries (a CUPTI callback
// or a driver hook called by libcudart), and a stack taken there walks through every libcupti, libcuda and
// libcudart frame before reaching the app, only to cut them (recorder/stacks.h). Taken in the cudart hook,
// the walk starts two frames above the app's call. The result is the same stack: both are cut at the first
// frame outside our library and the CUDA libraries, which is the app's call of the runtime function; it can
// only be longer (the 64 frames of a stack are not spent on CUDA frames first). Under the runtime backend it
// also saves the walk over our own record() frames.
//
// The stack is held on the hook's own stack frame; record() (recorder.cpp) uses it for every event of this
// thread that takes a stack while the scope lives. Scopes nest: an inner hook (the runtime calling its own
// exported API) keeps the outer one's stack, which is the app's.
#pragma once

#include "recorder/event_clock.h"
#include "recorder/self_cost.h"
#include "recorder/settings.h"
#include "recorder/stacks.h"

namespace gmt::recorder {

inline thread_local const RawStack* t_caller_stack __attribute__((tls_model("initial-exec"))) = nullptr;
// While t_caller_stack is set: whether its owner chose this call for the self-cost sample (recorder/self_cost.h),
// and then how long its capture took (at least 1). record() adds its own time to it for the events of this call.
inline thread_local uint64_t t_caller_capture_ns __attribute__((tls_model("initial-exec"))) = 0;

// capture_stack, and its time in t_caller_capture_ns when this call is one of the self-cost sample's. Not inlined
// into the hooks, so that capture_stack has one caller whether timed or not (recorder/recorder.cpp, record(), says
// why that matters).
void capture_caller_stack(RawStack& stack);

class CallerStack {
 public:
  // `wanted`: this call may record an event of its own (the hook's guard is active, or the hook only names the
  // call for a driver-level backend and is not nested in our own code).
  explicit CallerStack(bool wanted) {
    if (!wanted || t_caller_stack != nullptr || !settings().take_stacks) return;
    capture_caller_stack(stack_);
    t_caller_stack = &stack_;
    owner_ = true;
  }
  ~CallerStack() {
    if (owner_) t_caller_stack = nullptr, t_caller_capture_ns = 0;
  }
  CallerStack(const CallerStack&) = delete;
  CallerStack& operator=(const CallerStack&) = delete;

 private:
  RawStack stack_;
  bool owner_ = false;
};

}  // namespace gmt::recorder
