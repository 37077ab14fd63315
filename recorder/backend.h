// Which capture path counts allocations in this process. Exactly one does, so nothing is counted twice:
//   Runtime     - the cudart hooks (interpose/cudart_hooks.cpp). Used under the simulated runtime, which has
//                 no driver below it.
//   Cupti       - CUPTI driver-API callbacks (cupti/). Sees static cudart, the driver API, VMM and pools.
//   DriverHooks - the driver entry points handed out through dlsym / cuGetProcAddress, and the exported cu*
//                 symbols (interpose/driver_hooks.cpp). The fallback when CUPTI cannot be had.
// With a driver-level backend, the cudart hooks only name the runtime call in progress (RuntimeApiScope),
// so that an event seen as cuMemAlloc_v2 is reported as the cudaMalloc the app made.
#pragma once

#include <string>

#include "schema/trace_schema.h"

namespace gmt::recorder {

enum class Backend : int { Undecided = 0, Runtime = 1, Cupti = 2, DriverHooks = 3 };

// What the user asked for, from GMT_BACKEND: "auto" (default), "cupti", "hooks" or "runtime".
enum class BackendRequest { Auto, Cupti, Hooks, Runtime };
BackendRequest requested_backend();

Backend active_backend();
const char* backend_name(Backend backend);  // the meta 'backend' value: "cupti", "hooks", "runtime"
bool driver_level_backend();  // Cupti or DriverHooks: the cudart hooks must not count allocations

// Sets the backend once (later calls are ignored and return false) and says so once on stderr when `note`
// is not empty (e.g. why CUPTI could not be used). The note is stored in the trace (meta backend_note).
bool set_active_backend(Backend backend, const std::string& note);
std::string backend_note();

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
