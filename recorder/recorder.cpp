#include "recorder/recorder.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

#include "recorder/cache_hints.h"
#include "recorder/caller_stack.h"
#include "recorder/control_channel.h"
#include "recorder/event_clock.h"
#include "recorder/event_counting.h"
#include "recorder/guard.h"
#include "recorder/recorder_state.h"
#include "recorder/self_cost.h"
#include "recorder/settings.h"

namespace gmt::recorder {
namespace detail {
Recorder* g_recorder = nullptr;
}  // namespace detail

namespace {

using namespace detail;

// This thread's event buffer in g_recorder (registered by its first event; cleared at its exit and in a forked
// child). The key's destructor tells the recorder that the thread has exited.
thread_local ThreadBuffer* t_buffer __attribute__((tls_model("initial-exec"))) = nullptr;
pthread_key_t g_thread_exit_key;
bool g_thread_exit_key_made = false;

// A chunk was just queued full (a thread's, or the late events'): the writer is woken at one transaction's
// worth. Back-pressure instead of loss: past kMaxPendingChunks full chunks, the app thread waits (the lock
// released) until the writer has taken some. Only while a writer thread is there to drain them. Counted, and
// written into the trace with the next batch: never silent.
void chunk_filled_locked(Recorder& r, std::unique_lock<std::mutex>& lock) {
  if (r.buffers.full_chunks_locked() == kFullChunksToWakeWriter) r.wake_writer.notify_one();
  if (r.buffers.full_chunks_locked() <= kMaxPendingChunks || r.stop_requested || t_never_wait) return;
  t_holds_recorder_lock = false;  // the wait releases the mutex
  uint64_t wait_start = now_ns();
  r.chunk_written.wait(lock, [&r] {
    return r.buffers.full_chunks_locked() <= kMaxPendingChunks || r.disabled.load(std::memory_order_relaxed) ||
           r.stop_requested;
  });
  t_holds_recorder_lock = true;
  ++r.backpressure_waits;
  r.backpressure_wait_ns += now_ns() - wait_start;
}

// The calling thread's buffer is full: queue it for the writer, take a fresh one.
GMT_COLD void hand_over_full_chunk(Recorder& r, ThreadBuffer& buffer) {
  yield_to_fork(r);
  std::unique_lock lock(r.mutex);
  HoldsRecorderLock holds;
  if (r.disabled.load(std::memory_order_relaxed)) {  // no consumer reads it any more
    r.buffers.discard_locked(buffer);
    return;
  }
  if (t_never_wait && r.buffers.full_chunks_locked() >= kMaxPendingChunksNeverWait) {
    // The chunk is reused in place, so no consumer may be reading it: the consumer reads published slots outside
    // this lock, under write_mutex, until it gives them back. Safe when no consumer is at work (try_lock, never
    // lock: write_mutex comes before `mutex` in the lock order), or when this thread's queued chunks fill the
    // snapshot the consumer reads. Otherwise the chunk is queued after all: at most a snapshot's worth of chunks
    // more for this thread, which the consumer at work is draining.
    std::unique_lock consumer(r.write_mutex, std::try_to_lock);
    if (consumer.owns_lock() || EventBuffers::filling_beyond_snapshot_locked(buffer, kEventsPerTransaction)) {
      r.dropped_events += r.buffers.discard_locked(buffer);
      return;
    }
  }
  r.buffers.hand_over_locked(buffer);
  chunk_filled_locked(r, lock);
}

// The thread has exited (the key's destructor, with the buffer as its value): its buffer is reused once drained.
// A thread that records again after this (a later destructor calling CUDA) registers anew.
void on_thread_exit(void* buffer) {
  Recorder* r = g_recorder;
  if (r == nullptr || buffer != t_buffer) return;  // not this recorder's (cannot happen: fork clears both)
  t_buffer = nullptr;
  yield_to_fork(*r);
  std::lock_guard lock(r->mutex);
  HoldsRecorderLock holds;
  EventBuffers::thread_exited_locked(*static_cast<ThreadBuffer*>(buffer));
}

// The calling thread's first event: a buffer of its own (and the writer, for the process's first).
GMT_COLD ThreadBuffer* register_this_thread(Recorder& r) {
  yield_to_fork(r);
  std::lock_guard lock(r.mutex);
  HoldsRecorderLock holds;
  if (r.disabled.load(std::memory_order_relaxed)) return nullptr;
  if (!r.writer_started) start_writer_locked(r);
  ThreadBuffer* buffer = r.buffers.register_thread_locked();
  t_buffer = buffer;
  if (g_thread_exit_key_made) pthread_setspecific(g_thread_exit_key, buffer);
  return buffer;
}

// A stack new to this thread, interned under the recorder's lock (stacks.h's InternNewStack, with the recorder).
GMT_COLD StackTable::Interned intern_new_stack(void* recorder, const RawStack& stack, uint64_t hash) {
  Recorder& r = *static_cast<Recorder*>(recorder);
  StackTable::Interned interned;
  {
    yield_to_fork(r);
    std::lock_guard lock(r.mutex);
    HoldsRecorderLock holds;
    interned = r.stacks.intern(stack, hash);
  }
  remember_stack_id(r.stacks, stack, hash, interned);
  return interned;
}

// A thread's first event on a device: the first thread to claim the device describes it (the recursion guard
// is held, so the driver calls this makes record nothing).
GMT_COLD void claim_device_description(Recorder& r, ThreadBuffer& buffer, int16_t device) {
  const uint64_t bit = uint64_t{1} << device;
  buffer.devices_known_claimed |= bit;
  if (r.devices_claimed.load(std::memory_order_relaxed) & bit) return;
  if (r.devices_claimed.fetch_or(bit, std::memory_order_relaxed) & bit) return;  // another thread was first
  DeviceDescription description;
  if (describe_device(device, description)) {
    std::lock_guard descriptions_lock(r.descriptions_mutex);
    r.descriptions.push_back(std::move(description));
  }
}

// An event after the trace was closed at exit (a library finalized after ours freeing its memory): not in the
// trace, so counted where `run` reads it afterwards (meta frees_after_close). Without `run`'s file, nowhere.
GMT_COLD void count_event_after_close(Recorder& r, const EventRecord& event) {
  if (!r.closed.load(std::memory_order_relaxed) || r.after_close_counters == nullptr) return;
  r.after_close_counters->events_after_close.fetch_add(1, std::memory_order_relaxed);
  if (event.kind == schema::EventKind::Free) {
    r.after_close_counters->frees_after_close.fetch_add(1, std::memory_order_relaxed);
  }
}

// Times never go backwards within one order (see record()): the time to store.
uint64_t keep_order(uint64_t time_ns, uint64_t& last_time_ns) {
  if (time_ns < last_time_ns) return last_time_ns;
  last_time_ns = time_ns;
  return time_ns;
}

}  // namespace

GMT_HOT uint64_t now_ns() { return event_time_ns(); }

uint32_t read_thread_id() { return t_thread_id = static_cast<uint32_t>(syscall(SYS_gettid)); }

void create_recorder() {
  if (g_recorder) return;
  calibrate_event_clock();  // the first calibration point; the writer takes the next ones
  g_thread_exit_key_made = pthread_key_create(&g_thread_exit_key, on_thread_exit) == 0;
  g_recorder = new Recorder;
  // The process `run` started counts its events where `run` reads them after a SIGKILL (schema/event_counters.h).
  if (schema::EventCounters* shared = map_shared_event_counters()) {
    g_recorder->buffers.use_counters_locked(shared);
    g_recorder->after_close_counters = shared;
  }
}

size_t thread_buffers_in_use() {
  if (!g_recorder) return 0;
  std::lock_guard lock(g_recorder->mutex);
  return g_recorder->buffers.buffers_in_use_locked();
}

namespace {
// Inlined into record(), its only caller: as a function of its own its prologue and epilogue cost ~20 instructions
// per event (callgrind, 2026-12-07).
inline __attribute__((always_inline)) void record_event(EventRecord& event, bool take_stack);
void flush_failure_now(Recorder& r);
}  // namespace

// One event in kSelfCostSampleEvery is timed (recorder/self_cost.h): the events of a hook that took the caller's
// stack follow that stack's choice, and their time includes its capture.
//
// Timed or not, an event's stack passes through the same return addresses in our code: record() (record_event,
// inlined into it) and capture_caller_stack each call capture_stack from one place (the timing starts in a function
// of its own, called on a branch that joins before that call; the tests ATimedRecordIsAnsweredByTheSameStoredWalk
// and ATimedCaptureIsAnsweredByTheSameStoredWalk fail if a timed event reaches it from a place of its own). Then a
// timed event's walk is the stored walk every other event from that place is answered by (unwind/fast_unwind.h), and
// its stack the same memo entry. Until 2026-12-07 the timed events had calls of their own (GCC 12 had also copied a
// call into both branches of a test on the sample): their stacks were walks apart, answered by a fresh walk 20% of the
// time against 1.7% for all events in the CPU stand-in, and the sample measured those (959-1609 ns per block event
// there, 213-447 ns after).
namespace {

// While a record() of this thread is timed: when it began (0: none is), and whether it is timed as part of the
// hook's caller stack (its capture timed by capture_caller_stack) rather than phase by phase.
thread_local uint64_t t_record_start __attribute__((tls_model("initial-exec"))) = 0;
thread_local bool t_record_under_caller_stack __attribute__((tls_model("initial-exec"))) = false;
thread_local uint64_t t_caller_capture_start __attribute__((tls_model("initial-exec"))) = 0;

// Whether this record() is one to time (inline: every event asks; the countdown is self_cost.h's). An event under
// the hook's caller stack follows that stack's choice and leaves the countdown to it.
inline bool record_is_timed(bool take_stack) {
  if (t_record_start != 0) return false;  // a record() inside a timed one: not timed itself
  if (take_stack && t_caller_stack != nullptr) return t_caller_capture_ns != 0;
  return self_cost_sample_this_event();
}

// A timed record() begins (record_is_timed said so).
GMT_COLD void start_record_timing(bool take_stack) {
  const bool under_caller_stack = take_stack && t_caller_stack != nullptr;
  const uint64_t start = event_time_ns();
  t_record_start = start;
  t_record_under_caller_stack = under_caller_stack;
  if (!under_caller_stack) {  // phase by phase too (self_cost.h's CostPhase): this record takes its own stack
    for (uint64_t& phase : t_cost_phase_ns) phase = 0;
    t_cost_phase_start = start;
  }
}

__attribute__((noinline)) void finish_record_timing(const EventRecord& event, bool take_stack) {
  mark_cost_phase(CostPhase::Append);
  t_cost_phase_start = 0;
  const bool under_caller_stack = t_record_under_caller_stack;
  const uint64_t spent = event_time_ns() - t_record_start + (under_caller_stack ? t_caller_capture_ns - 1 : 0);
  t_record_start = 0;
  const bool block =
      event.memory_kind == schema::MemoryKind::TensorBlock || event.memory_kind == schema::MemoryKind::HeapBlock;
  add_self_cost_sample(block ? CostedKind::Block : CostedKind::Cuda, spent);
  if (!under_caller_stack && block && take_stack) add_self_cost_phases(t_cost_phase_ns);
}

GMT_COLD void start_capture_timing() { t_caller_capture_start = event_time_ns(); }

}  // namespace

GMT_HOT void record(EventRecord& event, bool take_stack) {
  if (__builtin_expect(record_is_timed(take_stack), 0)) start_record_timing(take_stack);
  record_event(event, take_stack);
  if (__builtin_expect(t_record_start != 0, 0)) finish_record_timing(event, take_stack);
}

GMT_HOT __attribute__((noinline)) void capture_caller_stack(RawStack& stack) {
  if (__builtin_expect(self_cost_sample_this_event(), 0)) start_capture_timing();
  capture_stack(stack);
  if (__builtin_expect(t_caller_capture_start != 0, 0)) {
    t_caller_capture_ns = event_time_ns() - t_caller_capture_start + 1;
    t_caller_capture_start = 0;
  }
}

namespace {

GMT_HOT inline __attribute__((always_inline)) void record_event(EventRecord& event, bool take_stack) {
  if (__builtin_expect(g_recorder == nullptr, 0)) ensure_loaded();  // a hook before our constructor
  Recorder& r = *g_recorder;
  if (r.disabled.load(std::memory_order_relaxed)) {
    count_event_after_close(r, event);
    return;
  }
  ThreadBuffer* buffer = t_buffer;
  if (__builtin_expect(buffer == nullptr, 0)) {
    buffer = register_this_thread(r);
    if (!buffer) return;
  }
  // A device's first event: its description is taken now, by this thread (once per device and process).
  if (event.device >= 0 && event.device < 64 && !(buffer->devices_known_claimed & (uint64_t{1} << event.device))) {
    claim_device_description(r, *buffer, event.device);
  }

  if (take_stack) {  // the costly part
    // A stack this thread recorded before is found in its own cache (stacks.h); a new one takes the lock.
    if (const RawStack* caller = t_caller_stack) {
      // Taken by the runtime hook this event is recorded in (caller_stack.h), only when stacks are taken at all.
      event.stack_id = stack_id_of(r.stacks, *caller, intern_new_stack, &r);
    } else {
      const Settings& s = settings();  // read once: an out-of-line call
      if (s.take_stacks) {
        RawStack raw;  // here, not above: its fields' initial values cost ~6 instructions per event without stacks
        const bool python_only = s.block_python_stacks && event.memory_kind == schema::MemoryKind::TensorBlock;
        if (!(python_only && capture_python_only_stack(raw))) capture_stack(raw);
        event.stack_id = stack_id_of(r.stacks, raw, intern_new_stack, &r);
      }
    }
    mark_cost_phase(CostPhase::StackId);
  }
  // A thread's events are in time order in its buffer, which the writer's merge relies on. Across threads the
  // merge orders them (recorder/event_buffers.h): a thread stalled between its clock read and here (preempted:
  // 76-214 ms measured on a loaded machine) has its event written with the time of the last one written
  // before it, so times never go backwards in the trace.
  event.time_ns = keep_order(event.time_ns, buffer->last_time_ns);
  if (EventRecord* next = EventBuffers::append(*buffer, event)) {
    // The next slot's lines, now: fetched when written, a recycled chunk's lines (in the writer's core) cost a
    // cross-core miss then; fetched now, they arrive during the app's own work before its next CUDA call.
    prefetch_for_writing(next, sizeof(EventRecord));
  } else {
    hand_over_full_chunk(r, *buffer);
  }
  // A failed allocation is the evidence an OOM post-mortem needs, and the process may be killed right after it (an
  // orchestrator's OOM kill, the app's own exit(1)): it is committed before the failing call returns to the app.
  if (__builtin_expect(event.kind == schema::EventKind::AllocFailed, 0) ||
      __builtin_expect(event.kind == schema::EventKind::AllocatorSample &&
                           event.allocator_sample.trigger == schema::SampleTrigger::Oom,
                       0)) {
    flush_failure_now(r);
  }
}

}  // namespace

NeverWaitScope::NeverWaitScope() : previous_(t_never_wait) { t_never_wait = true; }
NeverWaitScope::~NeverWaitScope() { t_never_wait = previous_; }

void record_late(EventRecord* events, const RawStack* stacks, size_t count) {
  if (__builtin_expect(g_recorder == nullptr, 0)) ensure_loaded();
  Recorder& r = *g_recorder;
  yield_to_fork(r);
  std::unique_lock lock(r.mutex);
  HoldsRecorderLock holds;
  if (!r.writer_started && !r.disabled.load(std::memory_order_relaxed)) start_writer_locked(r);
  for (size_t i = 0; i < count; ++i) {
    if (r.disabled.load(std::memory_order_relaxed)) return;  // also after a back-pressure wait that ended so
    EventRecord& event = events[i];
    // Converted from another clock by the caller: never before the process started.
    event.time_ns = keep_order(std::max(event.time_ns, settings().start_monotonic_ns), r.last_late_time_ns);
    event.stack_id = stacks[i].depth > 0 ? r.stacks.intern(stacks[i]) : 0;
    if (r.buffers.append_late_locked(event)) chunk_filled_locked(r, lock);
  }
}

void set_meta_later(std::string key, std::string value) {
  if (__builtin_expect(g_recorder == nullptr, 0)) ensure_loaded();
  Recorder& r = *g_recorder;
  yield_to_fork(r);
  std::lock_guard lock(r.mutex);
  HoldsRecorderLock holds;
  if (r.disabled.load(std::memory_order_relaxed)) return;
  if (!r.writer_started) start_writer_locked(r);
  r.pending_meta.emplace_back(std::move(key), std::move(value));
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

namespace {

// Async-signal-safe unless `wake_writer`: atomics, clock_gettime and nanosleep only. Everything that is not (SQLite,
// malloc, mutexes) happens in the writer thread, which runs on while this thread waits here. A signal handler cannot
// wake the writer (it polls the tickets every kSignalPollInterval); an app thread can, and does (`wake_writer`).
bool request_flush(int timeout_ms, bool mark_complete, bool wake_writer = false) {
  if (t_holds_recorder_lock) return false;  // the writer would wait for the mutex this thread holds
  Recorder* r = g_recorder;
  if (!r) return false;
  // A child between fork and its atfork handler, or one of vfork (the parent's memory): no writer here.
  if (r->pid != getpid()) return false;
  if (!r->writer_serving.load(std::memory_order_acquire)) return false;
  // Before the ticket: a writer that sees the ticket sees the request to mark the trace complete with it.
  if (mark_complete) r->complete_requested.store(true, std::memory_order_release);
  uint64_t ticket = r->flush_requested.fetch_add(1, std::memory_order_acq_rel) + 1;
  if (wake_writer) {
    yield_to_fork(*r);
    std::lock_guard lock(r->mutex);
    r->wake_writer.notify_one();
  }
  if (t_never_wait) return true;  // PyTorch's allocator lock is held: the writer takes the ticket without us waiting
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

// After a failed allocation was appended (record_event): one batch with it, committed before the app goes on. ~1-2 ms
// (the writer's watermark lag and one transaction): failures are rare, and this is what they are kept for. Bounded: a
// writer stuck behind a backlog is given up on after kFailureFlushTimeoutMs, and the batch still comes.
constexpr int kFailureFlushTimeoutMs = 1000;
GMT_COLD void flush_failure_now(Recorder& r) {
  (void)r;
  request_flush(kFailureFlushTimeoutMs, /*mark_complete=*/false, /*wake_writer=*/true);
}

}  // namespace

bool flush_from_signal_handler(int timeout_ms) { return request_flush(timeout_ms, /*mark_complete=*/false); }

bool flush_before_image_ends(int timeout_ms) {
  // Inside a hook of ours (a signal handler that interrupted one calls _exit): what the hook was doing is half
  // done, so the trace is left as it is, incomplete, rather than marked complete.
  if (t_in_hook) return false;
  return request_flush(timeout_ms, /*mark_complete=*/true);
}

void image_continues_after_failed_exec() {
  Recorder* r = g_recorder;
  if (!r || r->pid != getpid() || !r->complete_requested.exchange(false, std::memory_order_acq_rel)) return;
  r->exec_failed.store(true, std::memory_order_release);
}

void keep_modules_before_unload() {
  Recorder* r = g_recorder;
  // No recorder yet, a vfork child (the parent's memory), or no stacks to symbolize: nothing to keep.
  if (!r || r->pid != getpid() || !settings().take_stacks || r->disabled.load(std::memory_order_relaxed)) return;
  r->modules.keep_before_unload();
}

void reset_after_fork_in_child() {
  // The parent's recorder stays allocated and untouched: its buffers are the parent's to write, its writer
  // thread does not exist here, and its SQLite connection must not be used by two processes.
  reset_event_clock_after_fork();  // first: now_ns() below reads it
  forget_control_channel_in_child();
  if (g_recorder) g_recorder->writer.drop_disk_reserve_in_child();
  g_recorder = new Recorder;
  t_thread_id = 0;
  t_buffer = nullptr;  // the parent's
  if (g_thread_exit_key_made) pthread_setspecific(g_thread_exit_key, nullptr);
  t_holds_recorder_lock = false;
  Settings& s = settings();
  s.start_unix_ns = 0;
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  s.start_unix_ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  s.start_monotonic_ns = now_ns();
}
}  // namespace gmt::recorder
