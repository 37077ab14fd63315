// Process lifecycle of the preload library, in one place (docs/design.md, "Inside the process", Lifecycle): load,
// fork, exit, fatal signals.
#include <pthread.h>

#include <cstdlib>
#include <mutex>

#include "recorder/fatal_signals.h"
#include "recorder/recorder.h"
#include "recorder/settings.h"

namespace gmt::recorder {
namespace {

void flush_at_exit() { finish(/*close=*/false); }

__attribute__((constructor)) void on_load() { ensure_loaded(); }

// Runs in _dl_fini, after every atexit handler: catches frees made by other libraries' exit handlers,
// then closes the trace (checkpointing the WAL into the main file).
__attribute__((destructor)) void on_unload() { finish(/*close=*/true); }

}  // namespace

void ensure_loaded() {
  // Once per process image. _dl_fini clears this library's "initialized" mark before running destructors,
  // so a dlopen of it during exit (an NVTX copy initializing late, the driver loading CUDA_INJECTION64_PATH)
  // would run the constructor again. Before our constructor, the first hook gets here: the loader runs the
  // constructors of the libraries the app links before those of a preloaded library, single-threaded.
  static std::once_flag once;
  std::call_once(once, [] {
    load_settings_from_environment();
    create_recorder();
    if (settings().start_paused) pause_from_load();  // run --paused: recording waits for `ctl resume`
    // The child abandons the parent's (locked) recorder and starts a fresh one: see reset_after_fork_in_child.
    pthread_atfork(lock_for_fork, unlock_after_fork_in_parent, reset_after_fork_in_child);
    // atexit from a library constructor is tied to this library (glibc registers it with our DSO handle), so
    // it runs when _dl_fini finalizes us, next to on_unload, not at exit() proper (seen with LD_DEBUG on glibc
    // 2.36). It stays as a second flush for paths that finalize us without running our destructor.
    std::atexit(flush_at_exit);
    // A crash or a kill request still writes what is buffered (recorder/fatal_signals.h). Installed now, so
    // that a handler the app installs later replaces ours (we never reinstall).
    install_fatal_signal_handlers();
  });
}

}  // namespace gmt::recorder
