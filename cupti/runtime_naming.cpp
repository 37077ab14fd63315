// The runtime-callback state machine of runtime_naming.h.
#include "cupti/runtime_naming.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

#include "cupti/cupti_callbacks.h"
#include "recorder/cache_hints.h"
#include "schema/environment.h"

namespace gmt::cupti {
namespace {

using schema::Api;

enum Phase : uint8_t {
  kOn = 1,       // enabled at start: nothing proves yet that the hooks name the calls
  kOff = 2,      // a cudart hook named an allocation: the callbacks are disabled
  kOnAgain = 3,  // an allocation arrived unnamed while off: enabled again, for good
  kForced = 4,   // GMT_CUPTI_RUNTIME_CALLBACKS=1: enabled, never switched off
};

// Written by start_runtime_naming() before the backend is set (no callback records before then), then read.
const CuptiTable* g_table = nullptr;
CUpti_SubscriberHandle g_subscriber = nullptr;
std::atomic<uint8_t> g_phase{kOn};
bool g_debug = false;  // GMT_DEBUG_CUPTI_NAMING=1: one stderr line per switch

// The outermost runtime call of this thread: the equivalent of recorder::RuntimeApiScope for a runtime we
// cannot interpose. `phase`: when its entry was seen. An exit whose entry we never saw (CUPTI started in the
// middle of that call, e.g. from cuInit inside the first cudaMalloc) clears nothing.
struct RuntimeCall {
  Api api = Api::Unknown;
  uint32_t correlation_id = 0;
  uint8_t phase = 0;
};
thread_local RuntimeCall t_runtime_call __attribute__((tls_model("initial-exec")));

bool enabled(uint8_t phase) { return phase != kOff; }

// One thread wins the move from `from` to `to` and (dis)ables the runtime sites. The phase changes first, so
// an entry seen during the switch is already stale (never a wrong name, at worst a missing one). A failure
// is reported once on stderr by GMT_CUPTI_CALL; the driver callbacks count on regardless.
void switch_phase(uint8_t from, uint8_t to) {
  if (!g_phase.compare_exchange_strong(from, to, std::memory_order_acq_rel)) return;
  const bool enable = enabled(to);
  switch_sites_of_domain(g_table, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, enable);
  if (g_debug) {
    // write(2): no stdio buffering shared with the app, and safe inside a CUPTI callback.
    const char* line = enable
                           ? "gpumemtrace: CUPTI runtime-API callbacks on again (an allocation no cudart hook named)\n"
                           : "gpumemtrace: CUPTI runtime-API callbacks off (the cudart hooks name the allocations)\n";
    ssize_t ignored = ::write(STDERR_FILENO, line, std::strlen(line));
    (void)ignored;
  }
}

}  // namespace

void start_runtime_naming(const CuptiTable* table, CUpti_SubscriberHandle subscriber) {
  g_table = table;
  g_subscriber = subscriber;
  const char* debug = std::getenv(schema::env::kDebugCuptiNaming);
  g_debug = debug && *debug == '1';
  const char* forced = std::getenv(schema::env::kCuptiRuntimeCallbacks);
  g_phase.store(forced && *forced == '1' ? kForced : kOn, std::memory_order_release);
}

GMT_HOT void on_runtime(CUpti_CallbackId cbid, const CUpti_CallbackData& data, bool active) {
  if (data.callbackSite == CUPTI_API_ENTER) {
    const uint8_t phase = g_phase.load(std::memory_order_relaxed);
    if (!active || !enabled(phase) || runtime_call_in_progress() != Api::Unknown) return;
    t_runtime_call = {api_of(CUPTI_CB_DOMAIN_RUNTIME_API, cbid), data.correlationId, phase};
    return;
  }
  // Cleared even when nested in one of our hooks: a stale name would mislabel every later event.
  if (t_runtime_call.api != Api::Unknown && t_runtime_call.correlation_id == data.correlationId) {
    t_runtime_call = {};
  }
}

Api runtime_call_in_progress() {
  if (t_runtime_call.api == Api::Unknown) return Api::Unknown;
  return t_runtime_call.phase == g_phase.load(std::memory_order_relaxed) ? t_runtime_call.api : Api::Unknown;
}

void note_allocation(bool named_by_hook) {
  const uint8_t phase = g_phase.load(std::memory_order_relaxed);
  if (phase == kOn && named_by_hook) {
    switch_phase(kOn, kOff);
  } else if (phase == kOff && !named_by_hook) {
    switch_phase(kOff, kOnAgain);
  }
}

}  // namespace gmt::cupti
