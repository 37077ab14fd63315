// The recorder: what every capture path calls once it has translated its world into an EventRecord.
// It owns stacks, buffering and the writer thread; callers own only the recursion guard (HookScope).
#pragma once

#include <cstdint>

#include <cstddef>
#include <string>

#include "recorder/event.h"
#include "recorder/stacks.h"

namespace gmt::recorder {

// CLOCK_MONOTONIC in ns, the clock of every time in the trace (recorder/event_clock.h: from the TSC where the
// kernel's own clock is, else clock_gettime).
uint64_t now_ns();

// The kernel thread id of the calling thread, cached per thread (and refreshed in a forked child). Inline: every
// event asks. The variable is defined here, inline and constant-initialized, as self_cost.h's countdown: an `extern
// thread_local` is reached through a TLS wrapper function (it might need dynamic initialization), which returned
// null in the ASan+UBSan build.
inline thread_local uint32_t t_thread_id __attribute__((tls_model("initial-exec"))) = 0;
uint32_t read_thread_id();
inline uint32_t current_thread_id() {
  if (__builtin_expect(t_thread_id != 0, 1)) return t_thread_id;
  return read_thread_id();
}

// The library's load-time setup (settings, fork and exit handlers, fatal-signal handlers, the recorder),
// once. Our constructor runs it, unless a hook ran it first: a library the app links is initialized before
// a preloaded one, and its constructors may already call CUDA (recorder/lifecycle.cpp).
void ensure_loaded();
// The recorder's part of it: creates the recorder state. Idempotent.
void create_recorder();

// Appends one event. With `take_stack`, the caller's call stack is captured and interned first.
// Cheap: no I/O, no SQLite, no lock but once per chunk of events and for a stack new to the process (the
// thread's own buffer: recorder/event_buffers.h). Call only inside an active HookScope.
void record(EventRecord& event, bool take_stack);

// While one lives on a thread, record() never waits for the writer: for callers that hold another library's lock
// (PyTorch's allocator, recorder/framework_blocks.h), where a wait would stall every thread of the app that takes
// that lock. Past kMaxPendingChunksNeverWait full chunks, such a thread's full chunk is dropped instead, and counted
// (meta dropped_events: the trace is then incomplete). Nests.
class NeverWaitScope {
 public:
  NeverWaitScope();
  ~NeverWaitScope();
  NeverWaitScope(const NeverWaitScope&) = delete;
  NeverWaitScope& operator=(const NeverWaitScope&) = delete;

 private:
  bool previous_;
};

// Appends events that someone else recorded earlier and hands over late, in batches (PyTorch's tensor blocks:
// recorder/tensor_blocks.cpp), each with its stack already made (Python frames as tagged values). Their times are
// their own: they never go backwards among such events, but they are not clamped against the hooks' events, which
// they may precede by seconds (docs/trace-format.md: events_time_ordered holds per source). Cheap as record().
void record_late(EventRecord* events, const RawStack* stacks, size_t count);

// Threads whose event buffers are in use: those that recorded, less those that exited and were drained. For tests.
size_t thread_buffers_in_use();

// Sets a meta key with the next batch the writer writes (for keys that the in-process Python package keeps
// current, e.g. tensor_blocks_overruns). A later value of the same key wins.
void set_meta_later(std::string key, std::string value);

// `run --paused` (GMT_START_PAUSED, recorder/pause.cpp). At load: recording starts paused, as after
// gmt_set_recording_paused(1), but nothing is written yet (a process that never calls CUDA gets no trace). At the
// process's first CUDA call (interpose/backend_start.cpp, once its backend runs): the pause is dated from then, the
// backend's capture is switched off, and a "pause" mark is recorded, which starts the writer thread: the trace and
// its control channel exist from then on, so that `gpumemtrace ctl ... resume` can reach the process.
void pause_from_load();
void begin_paused_start();
// The exit handler that samples every stream-ordered pool once more while the runtime still answers (pool_peaks.h):
// registered when the writer starts, or, when it started paused, at the first resume (once). An atexit handler runs
// before those registered before it, so it must come after the CUDA runtime's own teardown was registered.
void register_exit_pool_sampling();

// Writes everything buffered so far and marks the trace complete. Called at exit; safe to call twice.
// With `close`, the trace is closed and later events are dropped.
void finish(bool close);

// For fatal-signal handlers (recorder/fatal_signals.cpp) and nothing else. Async-signal-safe: asks the writer
// thread to write everything buffered so far and waits for it, at most `timeout_ms`; the handler itself
// touches no lock, no malloc and no SQLite. Returns false at once when this thread holds the recorder's lock
// or no writer thread runs, and false after the timeout (the writer is stuck: e.g. on a lock the dying
// thread holds). True when the flush completed.
bool flush_from_signal_handler(int timeout_ms);

// For the hooks of _exit, _Exit and the exec family (interpose/exit_hooks.cpp): the process image ends without
// running exit handlers or our destructor. Like flush_from_signal_handler (and as safe: _exit is often called
// from a signal handler), and the flush also marks the trace complete once its last event is written.
bool flush_before_image_ends(int timeout_ms);
// An exec returned (it failed): the process goes on recording, so its trace is no longer complete.
// Async-signal-safe.
void image_continues_after_failed_exec();

// For our dlclose (interpose/dlclose_hook.cpp), before the module is unmapped: the loaded modules are read now, so
// that stacks taken in a module loaded and unloaded between two of the writer's batches still symbolize.
void keep_modules_before_unload();

// Called in a forked child: forget the parent's buffers and writer; the child starts its own trace.
void reset_after_fork_in_child();
// Called around fork in the parent, so that the child never inherits a lock held mid-write.
void lock_for_fork();
void unlock_after_fork_in_parent();

}  // namespace gmt::recorder
