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
namespace {

std::atomic<int> g_backend{static_cast<int>(Backend::Undecided)};
std::mutex g_note_mutex;
// Leaked on purpose: read until the last destructor. Created on first use: hooks can run before this
// library's own initializers (see ensure_loaded).
std::string& note_storage() {
  static std::string* note = new std::string;
  return *note;
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

GMT_HOT Backend active_backend() { return static_cast<Backend>(g_backend.load(std::memory_order_acquire)); }

const char* backend_name(Backend backend) {
  switch (backend) {
    case Backend::Runtime: return schema::backend_names::kRuntime;
    case Backend::Cupti: return schema::backend_names::kCupti;
    case Backend::DriverHooks: return schema::backend_names::kHooks;
    case Backend::Undecided: break;
  }
  return "undecided";
}

GMT_HOT bool driver_level_backend() {
  Backend b = active_backend();
  return b == Backend::Cupti || b == Backend::DriverHooks;
}

bool set_active_backend(Backend backend, const std::string& note) {
  int expected = static_cast<int>(Backend::Undecided);
  if (!g_backend.compare_exchange_strong(expected, static_cast<int>(backend), std::memory_order_acq_rel)) {
    return false;
  }
  if (!note.empty()) {
    {
      std::lock_guard lock(g_note_mutex);
      note_storage() = note;
    }
    std::string line = "gpumemtrace: " + note + "\n";
    ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
    (void)ignored;
  }
  return true;
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

std::string backend_note() {
  std::lock_guard lock(g_note_mutex);
  return note_storage();
}

GMT_HOT schema::Api current_runtime_api() { return t_runtime_api; }

GMT_HOT RuntimeApiScope::RuntimeApiScope(schema::Api api) : previous_(t_runtime_api) {
  // The outermost runtime call names the event: cudaMallocHost calling cudaHostAlloc internally stays
  // cudaMallocHost.
  if (previous_ == schema::Api::Unknown) t_runtime_api = api;
}

GMT_HOT RuntimeApiScope::~RuntimeApiScope() { t_runtime_api = previous_; }

}  // namespace gmt::recorder
