// Deciding the backend (recorder/backend.h) the first time any hook, or the driver's injection entry point,
// runs: the driver entry-point hooks where they bind, else CUPTI (interpose/backend_choice.h has the rule); the
// runtime hooks only under the simulated runtime (or when asked). Cheap after the first call: one atomic load.
#pragma once

#include <atomic>

// recorder/backend.h's, declared here alone: that header brings schema/trace_schema.h, whose Api names cuda.h
// #defines to versioned ones when it comes first (interpose/driver_api.h).
namespace gmt::recorder {
extern std::atomic<int> g_backend;  // Backend::Undecided is 0 (static_assert in backend_start.cpp)
}  // namespace gmt::recorder

namespace gmt::interpose {

// Set while this thread decides: CUPTI's start calls into the driver, whose hooks land here again.
// Inline and constant-initialized: no TLS wrapper function (see recorder.h's t_thread_id).
inline thread_local bool t_deciding_backend __attribute__((tls_model("initial-exec"))) = false;
void start_backend();

// Inline: every hook asks, and after the first event the answer is one load.
inline void ensure_backend_started() {
  if (recorder::g_backend.load(std::memory_order_acquire) != 0 || t_deciding_backend) return;
  start_backend();
}

}  // namespace gmt::interpose
