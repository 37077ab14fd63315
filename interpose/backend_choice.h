// Which capture path counts in this process, and why: a pure function of what interpose/backend_start.cpp finds
// out (the request, the driver, whether the driver hooks bind) and of whether CUPTI can be started, so that every
// branch and every message is unit-tested (tests/backend/backend_choice_test.cpp) without a GPU.
//
// The rule (docs/design.md, "Backends: who counts an allocation"):
//   - no driver below the runtime (the simulated runtime, or no libcuda): the runtime hooks;
//   - auto: the driver hooks where they bind (the default: measured ~1.04x of a raw cudaMallocAsync pair against
//     CUPTI's ~1.8x, the same events); CUPTI where they cannot see the app's allocations (judge_hooks_reach says
//     when), saying why once; the hooks again, with a warning, when CUPTI cannot be had either;
//   - --backend cupti/hooks: that one; CUPTI falls back to the hooks when another tool holds it;
//   - run --verify: the other driver-level backend records every event too, for the cross-check (never counted).
#pragma once

#include <functional>
#include <string>

#include "recorder/backend.h"

namespace gmt::interpose {

// Whether the driver hooks see the app's allocations: the process's own dlsym, asked for a driver entry point on
// libcuda's handle (what cudart does to reach cuGetProcAddress), hands out our wrapper.
struct HooksReachFacts {
  bool wrapper_handed_out = false;  // the process's dlsym gave our wrapper for a driver function
  bool dlsym_is_ours = false;       // the process's first dlsym is this library's
  std::string dlsym_owner;          // the file that defines the process's first dlsym ("" when unknown)
};

struct HooksReach {
  bool bound = false;
  std::string why_not;  // a sentence for the user when not bound
};

// The verdict on the facts, with the reason a user can act on.
HooksReach judge_hooks_reach(const HooksReachFacts& facts);

struct BackendInputs {
  recorder::BackendRequest request = recorder::BackendRequest::Auto;
  bool verify = false;          // run --verify (GMT_VERIFY=1)
  bool simulated = false;       // the simulated CUDA runtime (GMT_SIMULATED=1)
  bool driver_present = false;  // libcuda.so.1 can be loaded
  HooksReach hooks;             // meaningful only when driver_present
};

// Starts CUPTI (cupti::start in the library); false with `why` set when it cannot be had. Called at most once per
// decision, and only when CUPTI is going to record: the hooks alone never load libcupti.
using CuptiStarter = std::function<bool(std::string& why)>;

recorder::BackendDecision choose_backend(const BackendInputs& inputs, const CuptiStarter& start_cupti);

}  // namespace gmt::interpose
