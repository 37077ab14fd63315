// The one recursion guard of the preload library (STYLE.md rule 3). Every hook takes it first; while a
// thread holds it, nested CUDA calls (ours, or the runtime calling its own exported API) are passed through
// unrecorded. Initial-exec TLS: no allocation, no lock, safe in any thread at any time.
#pragma once

namespace gmt::recorder {

inline thread_local bool t_in_hook __attribute__((tls_model("initial-exec"))) = false;

class HookScope {
 public:
  HookScope() : active_(!t_in_hook) { t_in_hook = true; }
  ~HookScope() {
    if (active_) t_in_hook = false;
  }
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;

  // False when this thread is already inside a hook (or is the writer thread): record nothing.
  bool active() const { return active_; }

 private:
  bool active_;
};

// For threads of our own (the writer): everything they do is invisible to the hooks.
inline void block_hooks_in_this_thread() { t_in_hook = true; }

}  // namespace gmt::recorder
