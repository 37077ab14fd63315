// The recorder's state, shared by its two halves: recorder.cpp (what app threads run: record() and its rare
// slow paths, fork, the signal flush) and writer_thread.cpp (the writer thread and the final flush at exit).
// Internal to recorder/: nothing outside it includes this.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "recorder/driver_queries.h"
#include "recorder/event_buffers.h"
#include "recorder/pool_peaks.h"
#include "recorder/stacks.h"
#include "recorder/trace_writer.h"
#include "schema/event_counters.h"
#include "unwind/module_map.h"

namespace gmt::recorder::detail {

// Past this many full chunks waiting for the writer (~17 MB of events at 88 B each, recorder/event_buffers.h;
// besides them each recording thread fills one chunk, and the writer holds one transaction's copy: the app holds
// at most ~20 MB of events: docs/benchmarks.md), producers wait: the policy is "no event is ever dropped"; the
// time spent waiting is the price when an app outruns SQLite.
constexpr size_t kMaxPendingChunks = 192;
// Threads that must not wait (NeverWaitScope: PyTorch's allocator lock held) go on queuing past kMaxPendingChunks,
// up to this many (~70 MB of events, a second or more of the writer's work); past it their full chunks are dropped
// and counted. The writer takes ~1.3M events/s (docs/benchmarks.md), so only an app that outruns it for seconds
// gets there.
constexpr size_t kMaxPendingChunksNeverWait = 4 * kMaxPendingChunks;
constexpr auto kFlushInterval = std::chrono::milliseconds(200);
// Events written per SQLite transaction (10-20 ms): what a fork waits for, at most, besides an occasional WAL
// checkpoint inside a commit.
constexpr size_t kEventsPerTransaction = 4096;
// The writer is woken once this many chunks are full (one transaction's worth), else every 200 ms: a transaction
// per chunk of one thread would be four times as many, smaller, transactions.
constexpr size_t kFullChunksToWakeWriter = kEventsPerTransaction / kChunkEvents;
// How often the writer looks for a flush asked for by a fatal-signal handler (flush_from_signal_handler): a
// handler cannot wake a condition variable safely, so the writer polls an atomic between its 200 ms batches.
constexpr auto kSignalPollInterval = std::chrono::milliseconds(10);

// One transaction's worth of the buffers: at most kEventsPerTransaction events stamped at or before the
// watermark, merged by time (recorder/event_buffers.h), every late event, and the stacks new since the last
// round. The stacks are taken after the events: a stack that an event names was interned before the event was
// published, so it is among them.
struct WriteRound {
  std::vector<EventBuffers::Source> sources;
  std::vector<EventRecord> events;
  std::vector<Chunk*> late;
  std::vector<NewStack> stacks;
};

// All mutable state of the recorder, in one object that is never destroyed (static destructors of the app
// and of other libraries may still call into the hooks after ours would have run). A forked child gets a
// fresh one and leaks the parent's, whose locks may have been held by threads that do not exist there.
struct Recorder {
  // Guards everything below except the writer: taken by an app thread only for its first event, once per
  // full chunk, for a stack new to the process, and for late events and meta; never for an event as such.
  std::mutex mutex;
  std::condition_variable wake_writer;
  std::condition_variable chunk_written;
  EventBuffers buffers;  // each recording thread's events (recorder/event_buffers.h)
  StackTable stacks;
  bool writer_started = false;
  bool stop_requested = false;
  // The trace could not be created, or was closed at exit: record nothing more. Set under the lock, read on
  // the hot path without it (an event that passed the check just before is dropped with its chunk). On a cache
  // line of its own, away from what the writer changes all the time.
  alignas(64) std::atomic<bool> disabled{false};
  // Set with `disabled` when the trace was closed at exit (not when it could not be created or stopped early):
  // what comes after is counted into `after_close_counters` (schema/event_counters.h), the shared file of `run`.
  std::atomic<bool> closed{false};
  schema::EventCounters* after_close_counters = nullptr;
  alignas(64) std::thread writer_thread;
  // Events that arrive late with times of their own (record_late: PyTorch's tensor blocks) keep their own order.
  uint64_t last_late_time_ns = 0;
  std::vector<std::pair<std::string, std::string>> pending_meta;  // set_meta_later: written with the next batch
  uint64_t backpressure_waits = 0;                                // see schema::meta::kBackpressureWaits
  uint64_t backpressure_wait_ns = 0;                              // their total time
  uint64_t dropped_events = 0;  // events of NeverWaitScope threads dropped past kMaxPendingChunksNeverWait

  // Held during SQLite work and while the buffers are consumed (one consumer at a time); fork waits for it so the
  // child inherits no half-write. Taken before `mutex`, never after.
  std::mutex write_mutex;
  uint64_t last_written_time_ns = 0;  // under write_mutex: the time of the last event written (merge())
  WriteRound round;                   // under write_mutex: kept between batches, so that its buffers are allocated once

  // fork must get both locks even while producers and the writer take them back to back (std::mutex is not
  // fair: measured, a fork under a flood of events waited 2-40 s). lock_for_fork holds fork_gate and raises
  // fork_pending; whoever sees the flag before taking a lock waits at the gate until the fork is done.
  std::mutex fork_gate;
  std::atomic<bool> fork_pending{false};
  TraceWriter writer;
  unwind::ModuleMap modules;
  bool trace_created = false;
  std::string trace_path;     // for messages; set when the trace is created
  bool write_failed = false;  // a batch could not be written (disk full...): profiling stopped, said once
  // meta backend & co. name the decided backend (under write_mutex). A trace created before the backend was decided
  // (a stream event comes first) gets them with the first batch after, before any event of a --verify cross-check
  // is committed: a trace never holds those without the meta that keeps them out of the figures.
  bool backend_meta_decided = false;
  PoolPeaks pool_peaks;       // under write_mutex: each stream-ordered pool's used bytes, as written (pool_peaks.h)
  uint64_t devices_seen = 0;  // bit d: an event on device d was written (under write_mutex)
  uint64_t devices_described = 0;  // bit d: device d's row is in the devices table (under write_mutex)
  // bit d: an app thread took on describing device d (record(), outside the lock), in the process's own
  // time: a short-lived process may exit before its writer runs, and at exit the driver is finalized already
  // (libcuda is loaded after us, so it is unloaded before us). The descriptions wait here for the writer.
  std::atomic<uint64_t> devices_claimed{0};
  std::mutex descriptions_mutex;  // guards `descriptions` only (taken alone, never with another lock)
  std::vector<DeviceDescription> descriptions;

  // Flushes asked for by fatal-signal handlers (async-signal-safe: atomics only). A handler takes a ticket
  // (++flush_requested) and waits until the writer has written a batch taken after that (flush_done >=
  // ticket). writer_serving: a writer thread exists and will serve requests; otherwise handlers do not wait.
  std::atomic<uint64_t> flush_requested{0};
  std::atomic<uint64_t> flush_done{0};
  std::atomic<bool> writer_serving{false};
  // _exit, _Exit and exec (flush_before_image_ends): set before such a flush takes its ticket, so the batch that
  // serves the ticket also marks the trace complete, after its last event. An exec that failed sets
  // exec_failed: the process goes on, and the next batch takes "complete" back.
  std::atomic<bool> complete_requested{false};
  std::atomic<bool> exec_failed{false};
  pid_t pid = getpid();  // the process this recorder belongs to (a forked child copies the parent's for a moment)
};

// Constant-initialized, created by create_recorder at load (or by the first hook, if that comes earlier).
extern Recorder* g_recorder __attribute__((visibility("hidden")));

// True while this (app) thread holds Recorder::mutex: a fatal-signal handler running on it must not wait for
// the writer, which would wait for that mutex. Set and cleared with the lock held; read by the handler only.
inline thread_local bool t_holds_recorder_lock __attribute__((tls_model("initial-exec"))) = false;

// Set while a NeverWaitScope lives on this thread (recorder.h).
inline thread_local bool t_never_wait __attribute__((tls_model("initial-exec"))) = false;

struct HoldsRecorderLock {
  HoldsRecorderLock() { t_holds_recorder_lock = true; }
  ~HoldsRecorderLock() { t_holds_recorder_lock = false; }
};

// Before taking Recorder::mutex or write_mutex: let a waiting fork go first.
inline void yield_to_fork(Recorder& r) {
  if (r.fork_pending.load(std::memory_order_acquire)) std::lock_guard gate(r.fork_gate);
}

// One line on stderr, written with write(2).
void warn_once(const std::string& message);
// Starts the writer thread (the process's first event, late event or meta).
void start_writer_locked(Recorder& r);

}  // namespace gmt::recorder::detail
