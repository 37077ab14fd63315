#include "recorder/recorder.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <thread>
#include <vector>

#include "recorder/backend.h"
#include "recorder/cache_hints.h"
#include "recorder/caller_stack.h"
#include "recorder/driver_queries.h"
#include "recorder/event_clock.h"
#include "recorder/guard.h"
#include "recorder/module_map.h"
#include "recorder/settings.h"
#include "recorder/stacks.h"
#include "recorder/stop_reason.h"
#include "recorder/trace_writer.h"

namespace gmt::recorder {
namespace {

constexpr size_t kChunkEvents = 4096;
// Past this many full chunks waiting for the writer (~17 MB of events at 88 B each; as much again may be in the
// writer's hands, so the app holds at most ~35 MB of events: docs/benchmarks.md), producers wait: the policy
// is "no event is ever dropped"; the time spent waiting is the price when an app outruns SQLite.
constexpr size_t kMaxPendingChunks = 48;
constexpr auto kFlushInterval = std::chrono::milliseconds(200);
// Chunks written per SQLite transaction (4096 events, 10-20 ms): what a fork waits for, at most, besides
// an occasional WAL checkpoint inside a commit.
constexpr size_t kChunksPerTransaction = 1;
// How often the writer looks for a flush asked for by a fatal-signal handler (flush_from_signal_handler): a
// handler cannot wake a condition variable safely, so the writer polls an atomic between its 200 ms batches.
constexpr auto kSignalPollInterval = std::chrono::milliseconds(10);

struct Chunk {
  Chunk() {}  // slots stay unconstructed: each below `count` was copied in whole (4096 defaults: ~360 KB written)
  size_t count = 0;
  union { EventRecord events[kChunkEvents]; };
};

// All mutable state of the recorder, in one object that is never destroyed (static destructors of the app
// and of other libraries may still call into the hooks after ours would have run). A forked child gets a
// fresh one and leaks the parent's, whose locks may have been held by threads that do not exist there.
struct Recorder {
  std::mutex mutex;  // guards everything below except the writer
  std::condition_variable wake_writer;
  std::condition_variable chunk_written;
  Chunk* current = nullptr;
  std::vector<Chunk*> full;
  std::vector<Chunk*> spare;
  StackTable stacks;
  bool writer_started = false;
  bool stop_requested = false;
  bool disabled = false;  // the trace could not be created, or was closed at exit: record nothing more
  uint64_t last_time_ns = 0;
  // Events that arrive late with times of their own (record_late: PyTorch's tensor blocks) keep their own order.
  uint64_t last_late_time_ns = 0;
  std::vector<std::pair<std::string, std::string>> pending_meta;  // set_meta_later: written with the next batch
  uint64_t backpressure_waits = 0;  // see schema::meta::kBackpressureWaits
  uint64_t backpressure_wait_ns = 0;  // of the last event recorded: times never go backwards in recording order
  std::thread writer_thread;

  std::mutex write_mutex;  // held during SQLite work; fork waits for it so the child inherits no half-write

  // fork must get both locks even while producers and the writer take them back to back (std::mutex is not
  // fair: measured, a fork under a flood of events waited 2-40 s). lock_for_fork holds fork_gate and raises
  // fork_pending; whoever sees the flag before taking a lock waits at the gate until the fork is done.
  std::mutex fork_gate;
  std::atomic<bool> fork_pending{false};
  TraceWriter writer;
  ModuleMap modules;
  bool trace_created = false;
  std::string trace_path;  // for messages; set when the trace is created
  bool write_failed = false;  // a batch could not be written (disk full...): profiling stopped, said once
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
  pid_t pid = getpid();  // the process this recorder belongs to (a forked child copies the parent's for a moment)
};

// Constant-initialized, created by create_recorder at load (or by the first hook, if that comes earlier).
Recorder* g_recorder = nullptr;

thread_local uint32_t t_thread_id __attribute__((tls_model("initial-exec"))) = 0;
// True while this (app) thread holds Recorder::mutex: a fatal-signal handler running on it must not wait for
// the writer, which would wait for that mutex. Set and cleared with the lock held; read by the handler only.
thread_local bool t_holds_recorder_lock __attribute__((tls_model("initial-exec"))) = false;

struct HoldsRecorderLock {
  HoldsRecorderLock() { t_holds_recorder_lock = true; }
  ~HoldsRecorderLock() { t_holds_recorder_lock = false; }
};

Chunk* take_spare_chunk(Recorder& r) {
  if (r.spare.empty()) return new Chunk;
  Chunk* c = r.spare.back();
  r.spare.pop_back();
  c->count = 0;
  return c;
}

void warn_once(const std::string& message) {
  // One line, written with write(2): no stdio buffering shared with the app.
  std::string line = "gpumemtrace: " + message + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

void write_backend_meta(Recorder& r) {
  r.writer.set_meta(schema::meta::kBackend, backend_name(active_backend()));
  std::string note = backend_note();
  if (!note.empty()) r.writer.set_meta(schema::meta::kBackendNote, note);
}

// The devices named by the events written so far, as meta "devices" ("0,1"). Ordinals beyond 63 are not
// tracked (no machine has that many GPUs per process today).
void note_devices(Recorder& r, const EventRecord* events, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    int device = events[i].device;
    if (device >= 0 && device < 64) r.devices_seen |= uint64_t{1} << device;
  }
}

// How stacks were walked (recorder/fast_unwind.h), at exit; nothing when stacks were off.
void write_stack_walk_meta(Recorder& r) {
  const Settings& s = settings();
  if (!s.take_stacks) return;
  StackWalkCounts counts = stack_walk_counts();
  r.writer.set_meta(schema::meta::kStackWalksLibunwind, std::to_string(counts.libunwind));
  if (s.unwind != UnwindMode::Check) return;
  r.writer.set_meta(schema::meta::kStackWalksChecked, std::to_string(counts.checked));
  r.writer.set_meta(schema::meta::kStackWalkMismatches, std::to_string(counts.mismatches));
}

void write_devices_meta(Recorder& r) {
  std::string list;
  for (int d = 0; d < 64; ++d) {
    if (r.devices_seen & (uint64_t{1} << d)) list += (list.empty() ? "" : ",") + std::to_string(d);
  }
  r.writer.set_meta(schema::meta::kDevices, list);
  // The devices table: name, UUID, capacity and PCI bus of each device the first time an event names it, as
  // the app thread that recorded that event described it (record()); a device it could not describe is tried
  // here in the writer thread, again at the next new device and at exit.
  std::vector<DeviceDescription> taken;
  {
    std::lock_guard descriptions_lock(r.descriptions_mutex);
    taken.swap(r.descriptions);
  }
  for (const DeviceDescription& description : taken) {
    const uint64_t bit = uint64_t{1} << description.ordinal;
    if (r.devices_described & bit) continue;
    r.writer.write_device(description);
    r.devices_described |= bit;
  }
  for (int d = 0; d < 64; ++d) {
    const uint64_t bit = uint64_t{1} << d;
    if (!(r.devices_seen & bit) || (r.devices_described & bit)) continue;
    DeviceDescription description;
    if (!describe_device(d, description)) continue;
    r.writer.write_device(description);
    r.devices_described |= bit;
  }
}

// Creates the trace file. Runs in the writer thread (or in finish() when the writer never ran).
bool create_trace(Recorder& r) {
  if (r.trace_created) return r.writer.is_open();
  r.trace_created = true;
  std::string path = trace_path_for_this_process();
  r.trace_path = path;
  std::string error;
  if (!r.writer.create(path, error)) {
    warn_once(error + "; the application continues without profiling");
    return false;
  }
  const Settings& s = settings();
  r.writer.set_meta(schema::meta::kPid, std::to_string(getpid()));
  r.writer.set_meta(schema::meta::kParentPid, std::to_string(getppid()));
  r.writer.set_meta(schema::meta::kCommandLine, command_line_of_this_process());
  r.writer.set_meta(schema::meta::kHostname, host_name());
  r.writer.set_meta(schema::meta::kStartUnixNs, std::to_string(s.start_unix_ns));
  r.writer.set_meta(schema::meta::kStartMonotonicNs, std::to_string(s.start_monotonic_ns));
  r.writer.set_meta(schema::meta::kSimulated, s.simulated ? "1" : "0");
  r.writer.set_meta(schema::meta::kEventClock, event_clock_name());
  write_backend_meta(r);
  r.writer.set_meta(schema::meta::kToolVersion, GMT_VERSION);
  r.writer.set_meta(schema::meta::kDroppedEvents, "0");
  r.writer.set_meta(schema::meta::kEventsTimeOrdered, "1");
  r.writer.set_meta(schema::meta::kComplete, "0");
  r.writer.set_launch_meta(s.launch);
  if (!s.registry_path.empty()) {
    int fd = ::open(s.registry_path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd >= 0) {
      std::string line = path + "\n";  // one write with O_APPEND: lines of several processes never mix
      ssize_t ignored = ::write(fd, line.data(), line.size());
      (void)ignored;
      ::close(fd);
    }
  }
  return true;
}

// Takes every buffered event (full chunks and the partly filled current one) and every new stack.
struct Batch {
  std::vector<Chunk*> chunks;
  std::vector<NewStack> stacks;
  uint64_t backpressure_waits = 0;  // the totals so far
  uint64_t backpressure_wait_ns = 0;
  std::vector<std::pair<std::string, std::string>> meta;
};

Batch take_batch_locked(Recorder& r) {
  Batch b;
  b.chunks.swap(r.full);
  if (r.current && r.current->count > 0) {
    b.chunks.push_back(r.current);
    r.current = nullptr;
  }
  b.stacks = r.stacks.take_new_stacks();
  b.backpressure_waits = r.backpressure_waits;
  b.backpressure_wait_ns = r.backpressure_wait_ns;
  b.meta.swap(r.pending_meta);
  return b;
}

// Before taking Recorder::mutex or write_mutex: let a waiting fork go first.
void yield_to_fork(Recorder& r) {
  if (r.fork_pending.load(std::memory_order_acquire)) std::lock_guard gate(r.fork_gate);
}

// Writes one batch, as transactions of at most kChunksPerTransaction chunks: the write lock is given back
// between them, so a fork (lock_for_fork) waits for one transaction, not for a whole backlog (under
// back-pressure a batch holds up to 256 chunks, seconds of SQLite work). Stacks and modules go in the first
// transaction, before any event that refers to them; a process killed in between leaves an exact prefix.
// The first failure (a full disk, an I/O error) stops profiling for good: one warning, the failed
// transaction is rolled back by closing the trace, and later events are dropped, so the trace keeps an exact
// prefix of the run (every event up to the last good transaction) instead of a run with holes. Returns
// false when profiling has stopped.
bool write_batch(Recorder& r, Batch& batch) {
  bool failed = false;
  bool stopped = false;
  for (size_t next = 0;;) {
    yield_to_fork(r);
    std::lock_guard write_lock(r.write_mutex);
    stopped = r.write_failed;
    if (stopped || !r.writer.is_open()) break;
    bool first = next == 0;  // stacks and modules go with the first transaction of the batch
    std::vector<const EventRecord*> runs;
    std::vector<size_t> lengths;
    uint64_t devices_before = r.devices_seen;
    for (size_t end = std::min(batch.chunks.size(), next + kChunksPerTransaction); next < end; ++next) {
      runs.push_back(batch.chunks[next]->events);
      lengths.push_back(batch.chunks[next]->count);
      note_devices(r, batch.chunks[next]->events, batch.chunks[next]->count);
    }
    std::vector<NewStack> no_stacks;
    std::vector<Module> modules;
    if (first) modules = r.modules.scan_new_modules();
    if (!r.writer.write_batch(first ? batch.stacks : no_stacks, runs.data(), lengths.data(), runs.size(),
                              modules)) {
      failed = stopped = r.write_failed = true;
      warn_once("writing the trace '" + r.trace_path + "' failed (" + r.writer.last_error() +
                "); profiling stopped: the trace keeps the events written before, and the application "
                "continues");
      r.writer.close();  // rolls the failed transaction back; every committed one stays readable
      store_stop_reason(r.trace_path, stop_reason_for_write_error(r.writer.last_error()));
      break;
    }
    if (r.devices_seen != devices_before) write_devices_meta(r);  // rare: a device seen for the first time
    if (next >= batch.chunks.size()) break;
  }
  if ((batch.backpressure_waits > 0 || !batch.meta.empty()) && !stopped) {
    yield_to_fork(r);
    std::lock_guard write_lock(r.write_mutex);
    if (r.writer.is_open()) {
      if (batch.backpressure_waits > 0) {
        r.writer.set_meta(schema::meta::kBackpressureWaits, std::to_string(batch.backpressure_waits));
        r.writer.set_meta(schema::meta::kBackpressureWaitNs, std::to_string(batch.backpressure_wait_ns));
      }
      for (const auto& [key, value] : batch.meta) r.writer.set_meta(key.c_str(), value);
    }
  }
  std::lock_guard lock(r.mutex);
  for (Chunk* c : batch.chunks) r.spare.push_back(c);
  if (failed) r.disabled = true;  // record() drops events from now on; producers waiting below go on
  r.chunk_written.notify_all();
  return !stopped;
}

// True when the writer has something to do before its next periodic batch.
bool writer_has_work_locked(const Recorder& r) {
  return r.stop_requested || !r.full.empty() ||
         r.flush_requested.load(std::memory_order_acquire) != r.flush_done.load(std::memory_order_relaxed);
}

void writer_main(Recorder* r) {
  block_hooks_in_this_thread();
  bool ok;
  {
    std::lock_guard write_lock(r->write_mutex);
    ok = create_trace(*r);
  }
  if (!ok) {
    r->writer_serving.store(false, std::memory_order_release);
    std::lock_guard lock(r->mutex);
    r->disabled = true;
    r->chunk_written.notify_all();
    return;
  }
  for (;;) {
    Batch batch;
    bool stop;
    uint64_t serving;  // the signal-flush tickets this batch answers
    yield_to_fork(*r);
    {
      std::unique_lock lock(r->mutex);
      auto deadline = std::chrono::steady_clock::now() + kFlushInterval;
      while (!writer_has_work_locked(*r)) {
        auto now = std::chrono::steady_clock::now();
        if (now >= deadline) break;
        r->wake_writer.wait_for(lock, std::min<std::chrono::steady_clock::duration>(kSignalPollInterval,
                                                                                    deadline - now));
      }
      serving = r->flush_requested.load(std::memory_order_acquire);
      batch = take_batch_locked(*r);
      stop = r->stop_requested;
    }
    bool written = write_batch(*r, batch);
    r->flush_done.store(serving, std::memory_order_release);
    calibrate_event_clock();  // at most every 50 ms; the writer wakes at least every 200 ms
    if (stop || !written) break;
  }
  r->writer_serving.store(false, std::memory_order_release);
}

void start_writer_locked(Recorder& r) {
  r.writer_started = true;
  r.writer_serving.store(true, std::memory_order_release);  // requests wait for it while it creates the trace
  // The writer must never take a signal meant for the app: block all of them while creating it.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  r.writer_thread = std::thread(writer_main, &r);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

// Appends one event under the lock (held by `lock`, which a back-pressure wait releases for a while).
void append_locked(Recorder& r, std::unique_lock<std::mutex>& lock, const EventRecord& event) {
  if (!r.writer_started) start_writer_locked(r);
  if (!r.current) r.current = take_spare_chunk(r);
  r.current->events[r.current->count++] = event;
  if (r.current->count < kChunkEvents) {
    // The next slot's lines, now: fetched when written, under the lock, a recycled chunk's lines (in the writer's
    // core) cost a cross-core miss inside the critical section (the unlock, a locked instruction, waits for
    // every store before it); fetched now, they arrive during the app's own work before its next CUDA call.
    prefetch_for_writing(&r.current->events[r.current->count], sizeof(EventRecord));
    return;
  }
  r.full.push_back(r.current);
  r.current = nullptr;
  r.wake_writer.notify_one();
  // Back-pressure instead of loss. Only while a writer thread is there to drain the queue.
  if (r.full.size() <= kMaxPendingChunks) return;
  t_holds_recorder_lock = false;  // the wait releases the mutex
  uint64_t wait_start = now_ns();
  r.chunk_written.wait(lock, [&r] {
    return r.full.size() <= kMaxPendingChunks || r.disabled || r.stop_requested;
  });
  t_holds_recorder_lock = true;
  ++r.backpressure_waits;  // counted, and written into the trace with the next batch: never silent
  r.backpressure_wait_ns += now_ns() - wait_start;
}

// Times never go backwards within one order (see record()): the time to store.
uint64_t keep_order(uint64_t time_ns, uint64_t& last_time_ns) {
  if (time_ns < last_time_ns) return last_time_ns;
  last_time_ns = time_ns;
  return time_ns;
}

}  // namespace

uint64_t now_ns() { return event_time_ns(); }

uint32_t current_thread_id() {
  if (t_thread_id == 0) t_thread_id = static_cast<uint32_t>(syscall(SYS_gettid));
  return t_thread_id;
}

void create_recorder() {
  if (g_recorder) return;
  calibrate_event_clock();  // the first calibration point; the writer takes the next ones
  g_recorder = new Recorder;
}

void record(EventRecord& event, bool take_stack) {
  if (__builtin_expect(g_recorder == nullptr, 0)) ensure_loaded();  // a hook before our constructor
  Recorder& r = *g_recorder;
  RawStack raw;
  const RawStack* stack = nullptr;
  if (take_stack && settings().take_stacks) {  // outside the lock: the costly part
    stack = t_caller_stack;  // taken by the runtime hook this event is recorded in (caller_stack.h)
    if (!stack) {
      capture_stack(raw);
      stack = &raw;
    }
  }

  // A device's first event: its description is taken now, by this thread, outside the lock (once per device
  // and process; the recursion guard is held, so the driver calls below record nothing).
  if (event.device >= 0 && event.device < 64) {
    const uint64_t bit = uint64_t{1} << event.device;
    if (!(r.devices_claimed.load(std::memory_order_relaxed) & bit) &&
        !(r.devices_claimed.fetch_or(bit, std::memory_order_relaxed) & bit)) {
      DeviceDescription description;
      if (describe_device(event.device, description)) {
        std::lock_guard descriptions_lock(r.descriptions_mutex);
        r.descriptions.push_back(std::move(description));
      }
    }
  }

  // A stack this thread recorded before is found in its own cache, outside the lock (stacks.h).
  uint64_t hash = 0;
  if (stack) event.stack_id = cached_stack_id(r.stacks, *stack, hash);

  yield_to_fork(r);
  std::unique_lock lock(r.mutex);
  HoldsRecorderLock holds;  // destroyed before `lock`: cleared while the mutex is still held
  if (r.disabled) return;
  // A thread that read the clock and then stalled before the lock (preempted: 76-214 ms measured on a loaded
  // machine) gets the time of the event recorded before it. Harmless for the order of memory: a free is
  // recorded before the memory is given back and an allocation after it was granted, so recording order is
  // causal; and the analyzer reads in time order without a sort (analysis/ordered_events.h).
  event.time_ns = keep_order(event.time_ns, r.last_time_ns);
  if (stack && stack->depth > 0 && event.stack_id == 0) {
    StackTable::Interned interned = r.stacks.intern(*stack, hash);
    event.stack_id = interned.id;
    remember_stack_id(r.stacks, *stack, hash, interned);
  }
  append_locked(r, lock, event);
}

void record_late(EventRecord* events, const RawStack* stacks, size_t count) {
  if (__builtin_expect(g_recorder == nullptr, 0)) ensure_loaded();
  Recorder& r = *g_recorder;
  yield_to_fork(r);
  std::unique_lock lock(r.mutex);
  HoldsRecorderLock holds;
  for (size_t i = 0; i < count; ++i) {
    if (r.disabled) return;  // also after a back-pressure wait that ended with profiling stopped
    EventRecord& event = events[i];
    // Converted from another clock by the caller: never before the process started.
    event.time_ns = keep_order(std::max(event.time_ns, settings().start_monotonic_ns), r.last_late_time_ns);
    event.stack_id = stacks[i].depth > 0 ? r.stacks.intern(stacks[i]) : 0;
    append_locked(r, lock, event);
  }
}

void set_meta_later(std::string key, std::string value) {
  if (__builtin_expect(g_recorder == nullptr, 0)) ensure_loaded();
  Recorder& r = *g_recorder;
  yield_to_fork(r);
  std::lock_guard lock(r.mutex);
  HoldsRecorderLock holds;
  if (r.disabled) return;
  if (!r.writer_started) start_writer_locked(r);
  r.pending_meta.emplace_back(std::move(key), std::move(value));
}

void finish(bool close) {
  if (!g_recorder) return;
  Recorder& r = *g_recorder;
  HookScope scope;  // whatever SQLite or the loader do from here, the hooks stay out of it
  std::thread writer;
  {
    std::lock_guard lock(r.mutex);
    HoldsRecorderLock holds;
    if (!r.writer_started) return;  // this process never touched CUDA: no trace of its own
    r.stop_requested = true;
    r.wake_writer.notify_one();
    r.chunk_written.notify_all();
    writer.swap(r.writer_thread);
  }
  if (writer.joinable()) writer.join();

  // The writer has stopped: drain what came after its last batch here, synchronously.
  Batch batch;
  {
    std::lock_guard lock(r.mutex);
    HoldsRecorderLock holds;
    batch = take_batch_locked(r);
    if (close) r.disabled = true;
  }
  {
    std::lock_guard write_lock(r.write_mutex);
    if (!create_trace(r)) return;
  }
  if (!write_batch(r, batch)) return;
  std::lock_guard write_lock(r.write_mutex);
  if (!r.writer.is_open()) return;
  write_backend_meta(r);  // decided after the trace was created, in rare orders of first calls
  write_devices_meta(r);
  write_stack_walk_meta(r);
  r.writer.set_meta(schema::meta::kEndMonotonicNs, std::to_string(now_ns()));
  r.writer.set_meta(schema::meta::kComplete, "1");
  if (close) r.writer.close();
}

void lock_for_fork() {
  g_recorder->fork_gate.lock();
  g_recorder->fork_pending.store(true, std::memory_order_release);
  g_recorder->write_mutex.lock();
  g_recorder->mutex.lock();
  t_holds_recorder_lock = true;
}

void unlock_after_fork_in_parent() {
  t_holds_recorder_lock = false;
  g_recorder->mutex.unlock();
  g_recorder->write_mutex.unlock();
  g_recorder->fork_pending.store(false, std::memory_order_release);
  g_recorder->fork_gate.unlock();
}

bool flush_from_signal_handler(int timeout_ms) {
  // Async-signal-safe: atomics, clock_gettime and nanosleep only. Everything that is not (SQLite, malloc,
  // mutexes) happens in the writer thread, which runs on while this thread waits here.
  if (t_holds_recorder_lock) return false;  // the writer would wait for the mutex this thread holds
  Recorder* r = g_recorder;
  if (!r) return false;
  if (r->pid != getpid()) return false;  // a child between fork and its atfork handler: no writer here
  if (!r->writer_serving.load(std::memory_order_acquire)) return false;
  uint64_t ticket = r->flush_requested.fetch_add(1, std::memory_order_acq_rel) + 1;
  uint64_t deadline = now_ns() + static_cast<uint64_t>(timeout_ms) * 1000000ull;
  while (r->flush_done.load(std::memory_order_acquire) < ticket) {
    if (!r->writer_serving.load(std::memory_order_acquire) || now_ns() > deadline) return false;
    timespec pause{0, 1000000};  // 1 ms
    int saved_errno = errno;
    nanosleep(&pause, nullptr);
    errno = saved_errno;
  }
  return true;
}

void reset_after_fork_in_child() {
  // The parent's recorder stays allocated and untouched: its buffers are the parent's to write, its writer
  // thread does not exist here, and its SQLite connection must not be used by two processes.
  reset_event_clock_after_fork();  // first: now_ns() below reads it
  g_recorder = new Recorder;
  t_thread_id = 0;
  t_holds_recorder_lock = false;
  Settings& s = settings();
  s.start_unix_ns = 0;
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  s.start_unix_ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  s.start_monotonic_ns = now_ns();
}

}  // namespace gmt::recorder
