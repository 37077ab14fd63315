#include "recorder/backend.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "recorder/cache_hints.h"
#include "schema/environment.h"
#include "schema/trace_schema.h"

namespace gmt::recorder {
std::atomic<int> g_backend{static_cast<int>(Backend::Undecided)};

namespace {

// Bits of the paths that record (path_bit): the counting backend's, and under --verify the cross-check's.
std::atomic<uint8_t> g_recording_paths{0};
// The cross-check's schema::Source as a number; 0: none.
std::atomic<uint8_t> g_cross_check_source{0};
std::mutex g_decision_mutex;
// Leaked on purpose: read until the last destructor. Created on first use: hooks can run before this
// library's own initializers (see ensure_loaded).
BackendDecision& decision_storage() {
  static BackendDecision* decision = new BackendDecision;
  return *decision;
}

constexpr uint8_t path_bit(Backend path) { return static_cast<uint8_t>(1u << static_cast<int>(path)); }

schema::Source source_of(Backend backend) {
  switch (backend) {
    case Backend::Cupti: return schema::Source::Cupti;
    case Backend::DriverHooks: return schema::Source::DriverHook;
    default: return schema::Source::RuntimeHook;
  }
}

void say(const std::string& text) {
  std::string line = "gpumemtrace: " + text + "\n";
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

thread_local schema::Api t_runtime_api __attribute__((tls_model("initial-exec"))) = schema::Api::Unknown;

}  // namespace

BackendRequest requested_backend() {
  const char* value = getenv(schema::env::kBackend);
  if (!value || !*value || std::strcmp(value, "auto") == 0) return BackendRequest::Auto;
  if (std::strcmp(value, "cupti") == 0) return BackendRequest::Cupti;
  if (std::strcmp(value, "hooks") == 0) return BackendRequest::Hooks;
  if (std::strcmp(value, "runtime") == 0) return BackendRequest::Runtime;
  return BackendRequest::Auto;  // the CLI validates the value; a hand-set odd one falls back to auto
}

bool verify_requested() {
  const char* value = getenv(schema::env::kVerify);
  return value && std::strcmp(value, "1") == 0;
}

const char* backend_name(Backend backend) {
  switch (backend) {
    case Backend::Runtime: return schema::backend_names::kRuntime;
    case Backend::Cupti: return schema::backend_names::kCupti;
    case Backend::DriverHooks: return schema::backend_names::kHooks;
    case Backend::Undecided: break;
  }
  return "undecided";
}

bool set_backend_decision(const BackendDecision& decision) {
  {
    std::lock_guard lock(g_decision_mutex);
    if (active_backend() != Backend::Undecided) return false;
    decision_storage() = decision;
    const bool cross_check = decision.cross_check == Backend::Cupti || decision.cross_check == Backend::DriverHooks;
    if (cross_check) g_cross_check_source.store(static_cast<uint8_t>(source_of(decision.cross_check)));
    // The paths before the backend: a hook that finds the backend decided (ensure_backend_started) goes on at once
    // and asks records_through, which must already say yes for its path.
    g_recording_paths.store(path_bit(decision.backend) | (cross_check ? path_bit(decision.cross_check) : 0),
                            std::memory_order_release);
    g_backend.store(static_cast<int>(decision.backend), std::memory_order_release);
  }
  if (!decision.note.empty()) say(decision.note);
  if (!decision.cross_check_unavailable.empty()) {
    say("--verify: no cross-check in this process: " + decision.cross_check_unavailable);
  }
  return true;
}

BackendDecision backend_decision() {
  std::lock_guard lock(g_decision_mutex);
  return decision_storage();
}

GMT_HOT bool records_through(Backend path) {
  return (g_recording_paths.load(std::memory_order_acquire) & path_bit(path)) != 0;
}

bool is_cross_check_source(schema::Source source) {
  return g_cross_check_source.load(std::memory_order_relaxed) == static_cast<uint8_t>(source);
}

namespace {
std::atomic<CaptureSwitch> g_capture_switch{nullptr};
}  // namespace

void set_capture_switch(CaptureSwitch capture_switch) {
  g_capture_switch.store(capture_switch, std::memory_order_release);
}

void switch_capture(bool on) {
  if (CaptureSwitch capture_switch = g_capture_switch.load(std::memory_order_acquire)) capture_switch(on);
}

GMT_HOT schema::Api current_runtime_api() { return t_runtime_api; }

GMT_HOT RuntimeApiScope::RuntimeApiScope(schema::Api api) : previous_(t_runtime_api) {
  // The outermost runtime call names the event: cudaMallocHost calling cudaHostAlloc internally stays
  // cudaMallocHost.
  if (previous_ == schema::Api::Unknown) t_runtime_api = api;
}

GMT_HOT RuntimeApiScope::~RuntimeApiScope() { t_runtime_api = previous_; }

}  // namespace gmt::recorder
