// The one recursion guard of the preload library (docs/design.md, "Inside the process": hooks are thin). Every
// hook takes it first; while a thread holds it, nested CUDA calls (ours, or the runtime calling its own exported
// API) are passed through unrecorded. Initial-exec TLS: no allocation, no lock, safe in any thread at any time.
#pragma once

#include <atomic>
#include <cstdint>

namespace gmt::recorder {

// Who holds the guard on this thread: nobody (0), a hook or our own thread (kGuardHeld), or a driver entry-point
// wrapper that records the call it wraps (kGuardDriverWrapperRecording). The last tells the CUPTI callback that
// the same call raises inside that wrapper (run --verify: both driver-level backends record) that this call is
// the app's, to be recorded by CUPTI as well; a callback nested in any other hook of ours records nothing.
inline constexpr uint8_t kGuardHeld = 1;
inline constexpr uint8_t kGuardDriverWrapperRecording = 2;
inline thread_local uint8_t t_in_hook __attribute__((tls_model("initial-exec"))) = 0;

// Set by the benchmark control gmt_set_recording_paused (recorder/pause.cpp): while it is set, every hook
// passes its call through unrecorded, as a nested one does, so that a benchmark can time the same process with
// and without the profiler's work (bench/torch_step_ab.py). One relaxed load per hook.
inline std::atomic<bool> g_recording_paused{false};

class HookScope {
 public:
  enum class Holder : uint8_t { Hook, DriverWrapper };

  explicit HookScope(Holder holder = Holder::Hook)
      : held_before_(t_in_hook), active_(held_before_ == 0 && !g_recording_paused.load(std::memory_order_relaxed)) {
    if (held_before_ == 0) {
      t_in_hook = holder == Holder::DriverWrapper && active_ ? kGuardDriverWrapperRecording : kGuardHeld;
    }
  }
  ~HookScope() {
    if (held_before_ == 0) t_in_hook = 0;
  }
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;

  // False when this thread is already inside a hook (or is the writer thread), or recording is paused:
  // record nothing.
  bool active() const { return active_; }

  // Nested directly in a driver entry-point wrapper that records this very call (see kGuardDriverWrapperRecording).
  bool inside_recording_driver_wrapper() const { return held_before_ == kGuardDriverWrapperRecording; }

 private:
  uint8_t held_before_;  // 0: this scope took the guard, so it gives it back
  bool active_;
};

// What a HookScope made here would say, without taking the guard: for work done before the hook that records
// (the cudart hook's caller stack, taken for the driver-level event that follows).
inline bool a_hook_here_would_record() { return !t_in_hook && !g_recording_paused.load(std::memory_order_relaxed); }

// For threads of our own (the writer): everything they do is invisible to the hooks.
inline void block_hooks_in_this_thread() { t_in_hook = kGuardHeld; }

}  // namespace gmt::recorder
