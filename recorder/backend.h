// Which capture path counts allocations in this process. Exactly one does, so nothing is counted twice:
//   Runtime     - the cudart hooks (interpose/cudart_hooks.cpp). Used under the simulated runtime, which has
//                 no driver below it.
//   DriverHooks - the driver entry points handed out through dlsym / cuGetProcAddress, and the exported cu*
//                 symbols (interpose/driver_hooks.cpp). The default where they bind (interpose/backend_choice.h).
//   Cupti       - CUPTI driver-API callbacks (cupti/). Where the hooks cannot see the app's allocations, or when
//                 asked for.
// With a driver-level backend, the cudart hooks only name the runtime call in progress (RuntimeApiScope),
// so that an event seen as cuMemAlloc_v2 is reported as the cudaMalloc the app made.
// Under `run --verify` the other driver-level backend records every event as well, under its own source, for the
// cross-check that `report` makes (analysis/model/verify.h); it never counts.
#pragma once

#include <atomic>
#include <string>

#include "schema/trace_schema.h"

namespace gmt::recorder {

enum class Backend : int { Undecided = 0, Runtime = 1, Cupti = 2, DriverHooks = 3 };

// What the user asked for, from GMT_BACKEND: "auto" (default), "cupti", "hooks" or "runtime".
enum class BackendRequest { Auto, Cupti, Hooks, Runtime };
BackendRequest requested_backend();
// GMT_VERIFY=1 (`run --verify`): the other driver-level backend records every event too.
bool verify_requested();

// The backend decided (backend.cpp); Undecided until set_backend_decision. Read on every event: inline.
extern std::atomic<int> g_backend;
inline Backend active_backend() { return static_cast<Backend>(g_backend.load(std::memory_order_acquire)); }
const char* backend_name(Backend backend);  // the meta 'backend' value: "cupti", "hooks", "runtime"
// Cupti or DriverHooks: the cudart hooks must not count allocations.
inline bool driver_level_backend() {
  const Backend b = active_backend();
  return b == Backend::Cupti || b == Backend::DriverHooks;
}

// What interpose/backend_choice.h decided, stored in the trace (meta backend, backend_reason, backend_note,
// verify_backend, verify_unavailable).
struct BackendDecision {
  Backend backend = Backend::Undecided;
  std::string reason;                        // schema::backend_reasons
  std::string note;                          // one line for the user, said once on stderr; empty: nothing to say
  Backend cross_check = Backend::Undecided;  // run --verify: the second backend that records (Cupti or DriverHooks)
  std::string cross_check_unavailable;       // run --verify, when no cross-check could start: why
};

// Sets the decision once (later calls are ignored and return false); says the note, and why the cross-check
// cannot run, once each on stderr.
bool set_backend_decision(const BackendDecision& decision);
BackendDecision backend_decision();  // a copy, for the trace's meta

// Whether events reach the recorder through `path` (Cupti or DriverHooks): the backend that counts, and under
// --verify the cross-check as well. One load: the driver hooks ask it on every call.
bool records_through(Backend path);
// Whether `source` is the cross-check's (run --verify): its events are matched, never counted, so they take no
// pool samples (recorder/driver_events.cpp).
bool is_cross_check_source(schema::Source source);

// A backend whose capture costs the app something even while recording is paused (CUPTI dispatches every enabled
// callback, and ours returns at once) registers how to switch that capture off and on. The benchmark control
// gmt_set_recording_paused (recorder/pause.cpp) calls it, so that a paused process runs as if unprofiled and a
// paired on/off ratio is the backend's whole cost (bench/pairs_ab). Set once, by the backend's start.
using CaptureSwitch = void (*)(bool on);
void set_capture_switch(CaptureSwitch capture_switch);
void switch_capture(bool on);  // no-op when none is registered

// The runtime API call this thread is inside, when a driver-level backend counts. Unknown outside.
schema::Api current_runtime_api();

class RuntimeApiScope {
 public:
  explicit RuntimeApiScope(schema::Api api);
  ~RuntimeApiScope();
  RuntimeApiScope(const RuntimeApiScope&) = delete;
  RuntimeApiScope& operator=(const RuntimeApiScope&) = delete;

 private:
  schema::Api previous_;
};

}  // namespace gmt::recorder
