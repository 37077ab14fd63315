// The one recursion guard of the preload library (docs/design.md, "Inside the process": hooks are thin). Every
// hook takes it first; while a thread holds it, nested CUDA calls (ours, or the runtime calling its own exported
// API) are passed through unrecorded. Initial-exec TLS: no allocation, no lock, safe in any thread at any time.
#pragma once

#include <atomic>

namespace gmt::recorder {

inline thread_local bool t_in_hook __attribute__((tls_model("initial-exec"))) = false;

// Set by the benchmark control gmt_set_recording_paused (recorder/pause.cpp): while it is set, every hook
// passes its call through unrecorded, as a nested one does, so that a benchmark can time the same process with
// and without the profiler's work (bench/torch_step_ab.py). One relaxed load per hook.
inline std::atomic<bool> g_recording_paused{false};

class HookScope {
 public:
  HookScope() : owner_(!t_in_hook), active_(owner_ && !g_recording_paused.load(std::memory_order_relaxed)) {
    t_in_hook = true;
  }
  ~HookScope() {
    if (owner_) t_in_hook = false;
  }
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;

  // False when this thread is already inside a hook (or is the writer thread), or recording is paused:
  // record nothing.
  bool active() const { return active_; }

 private:
  bool owner_;   // this scope set t_in_hook, so it clears it
  bool active_;
};

// What a HookScope made here would say, without taking the guard: for work done before the hook that records
// (the cudart hook's caller stack, taken for the driver-level event that follows).
inline bool a_hook_here_would_record() {
  return !t_in_hook && !g_recording_paused.load(std::memory_order_relaxed);
}

// For threads of our own (the writer): everything they do is invisible to the hooks.
inline void block_hooks_in_this_thread() { t_in_hook = true; }

}  // namespace gmt::recorder
