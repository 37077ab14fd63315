// The writer thread: takes the app threads' events from their buffers (recorder/event_buffers.h), merged by
// time, and writes them into the trace in transactions; and the final flush at exit (finish()). It is the only
// consumer of the buffers (under write_mutex), and the only code in the process that touches SQLite.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <ctime>

#include "recorder/backend.h"
#include "recorder/control_channel.h"
#include "recorder/event_clock.h"
#include "recorder/guard.h"
#include "recorder/recorder.h"
#include "recorder/recorder_state.h"
#include "recorder/self_cost.h"
#include "recorder/settings.h"
#include "recorder/stop_reason.h"

namespace gmt::recorder {
namespace {

using namespace detail;

// Under write_mutex. Notes in the recorder whether the backend was decided, so it is written once more when it is.
void write_backend_meta(Recorder& r) {
  const BackendDecision decision = backend_decision();  // one consistent copy: backend, reason, cross-check
  r.backend_meta_decided = decision.backend != Backend::Undecided;
  r.writer.set_meta(schema::meta::kBackend, backend_name(decision.backend));
  if (!decision.reason.empty()) r.writer.set_meta(schema::meta::kBackendReason, decision.reason);
  if (!decision.note.empty()) r.writer.set_meta(schema::meta::kBackendNote, decision.note);
  if (decision.cross_check != Backend::Undecided) {
    r.writer.set_meta(schema::meta::kVerifyBackend, backend_name(decision.cross_check));
  }
  if (!decision.cross_check_unavailable.empty()) {
    r.writer.set_meta(schema::meta::kVerifyUnavailable, decision.cross_check_unavailable);
  }
}

// The devices named by the events written so far, as meta "devices" ("0,1"). Ordinals beyond 63 are not
// tracked (no machine has that many GPUs per process today).
void note_devices(Recorder& r, const EventRecord* events, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    int device = events[i].device;
    if (device >= 0 && device < 64) r.devices_seen |= uint64_t{1} << device;
  }
}

// How stacks were walked (unwind/fast_unwind.h), at exit; nothing when stacks were off.
void write_stack_walk_meta(Recorder& r) {
  const Settings& s = settings();
  if (!s.take_stacks) return;
  StackWalkCounts counts = stack_walk_counts();
  r.writer.set_meta(schema::meta::kStackWalksLibunwind, std::to_string(counts.libunwind));
  r.writer.set_meta(schema::meta::kStackMemoHits, std::to_string(counts.memo_hits));
  r.writer.set_meta(schema::meta::kStackWalksCounted, std::to_string(counts.walks));
  r.writer.set_meta(schema::meta::kStackWalksStored, std::to_string(counts.stored_walks));
  r.writer.set_meta(schema::meta::kStackWalksToTheCut, std::to_string(counts.walks_to_the_cut));
  r.writer.set_meta(schema::meta::kStackWalkWordChecks, std::to_string(counts.walk_word_checks));
  r.writer.set_meta(schema::meta::kStackWalksEvicted, std::to_string(counts.walk_evictions));
  if (s.unwind != UnwindMode::Check) return;
  r.writer.set_meta(schema::meta::kStackWalksChecked, std::to_string(counts.checked));
  r.writer.set_meta(schema::meta::kStackWalkMismatches, std::to_string(counts.mismatches));
  r.writer.set_meta(schema::meta::kStackMemoChecked, std::to_string(counts.memo_checked));
  r.writer.set_meta(schema::meta::kStackMemoMismatches, std::to_string(counts.memo_mismatches));
  const std::string examples = stack_memo_mismatch_examples();
  if (!examples.empty()) r.writer.set_meta(schema::meta::kStackMemoMismatchExamples, examples);
}

// The recorder's own time per event, from its sample (recorder/self_cost.h), at exit.
void write_self_cost_meta(Recorder& r) {
  const SelfCostTotals totals = self_cost_totals();
  const char* const keys[2][2] = {{schema::meta::kSelfCostCudaEvents, schema::meta::kSelfCostCudaNs},
                                  {schema::meta::kSelfCostBlockEvents, schema::meta::kSelfCostBlockNs}};
  for (int k = 0; k < 2; ++k) {
    if (totals.sampled[k] == 0) continue;
    r.writer.set_meta(keys[k][0], std::to_string(totals.sampled[k]));
    r.writer.set_meta(keys[k][1], std::to_string(totals.ns[k] / totals.sampled[k]));
  }
  if (totals.phase_samples == 0) return;
  static const char* const kPhaseNames[kCostPhases] = {"walk",         "python_key", "memo",
                                                       "python_merge", "stack_id",   "append"};
  std::string phases;
  for (int p = 0; p < kCostPhases; ++p) {
    phases +=
        (p ? "," : "") + std::string(kPhaseNames[p]) + "=" + std::to_string(totals.phase_ns[p] / totals.phase_samples);
  }
  // The walk phase apart from its long tail (recorder/self_cost.h): the stored answers' check alone, and how many
  // of the timed events walked for longer.
  const uint64_t short_walks = totals.phase_samples - totals.long_walks;
  const uint64_t short_walk_ns = totals.phase_ns[static_cast<int>(CostPhase::Walk)] - totals.long_walk_ns;
  if (short_walks > 0) phases += ",walk_short=" + std::to_string(short_walk_ns / short_walks);
  phases += ",walks_long=" + std::to_string(totals.long_walks) + "/" + std::to_string(totals.phase_samples);
  r.writer.set_meta(schema::meta::kSelfCostBlockPhases, phases);
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

// finish() has begun: the driver may be finalized already (libcuda is loaded after us, so finalized before us), so
// no pool is read any more.
std::atomic<bool> g_finishing{false};

// One sample of a pool's reserved and used bytes, read now (pool_peaks.h); false when nothing could say.
bool pool_sample(const PoolPeaks::Pool& pool, EventRecord& e) {
  e.kind = schema::EventKind::PoolUsage;
  e.pool_usage = PoolUsagePayload{};
  if (!read_pool_usage(pool.second, pool.first, e.pool_usage)) return false;
  e.time_ns = now_ns();
  e.thread_id = current_thread_id();
  e.device = pool.first;
  return true;
}

// Under write_mutex, after a batch was written: each pool whose used bytes reached a new peak in it gets one sample of
// its reserved bytes, read now (pool_peaks.h).
void sample_pool_peaks(Recorder& r, const std::vector<const EventRecord*>& runs, const std::vector<size_t>& lengths) {
  for (size_t i = 0; i < runs.size(); ++i) {
    for (size_t j = 0; j < lengths[i]; ++j) r.pool_peaks.on_event(runs[i][j]);
  }
  const std::vector<PoolPeaks::Pool> peaked = r.pool_peaks.take_new_peaks();
  if (peaked.empty() || g_finishing.load(std::memory_order_relaxed)) return;
  std::vector<EventRecord> samples;
  for (const PoolPeaks::Pool& pool : peaked) {
    if (EventRecord e; pool_sample(pool, e)) samples.push_back(e);
  }
  r.writer.write_pool_usage(samples);  // a failure here fails the next batch too, which stops profiling
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
  if (s.take_stacks && s.block_stack_sample_bytes > 0) {
    r.writer.set_meta(schema::meta::kBlockStackSampleBytes, std::to_string(s.block_stack_sample_bytes));
  }
  r.writer.set_meta(schema::meta::kEventClock, event_clock_name());
  write_backend_meta(r);
  r.writer.set_meta(schema::meta::kToolVersion, GMT_VERSION);
  r.writer.set_meta(schema::meta::kDroppedEvents, "0");
  r.writer.set_meta(schema::meta::kEventsTimeOrdered, "1");
  r.writer.set_meta(schema::meta::kComplete, "0");
  r.writer.set_launch_meta(s.launch);
  if (s.aggregate && !r.writer.enable_aggregate(s.start_monotonic_ns, s.aggregate_window_ns, error)) {
    warn_once("cannot keep an aggregate trace (" + error + "); writing the full trace instead");
  }
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

// What a batch writes besides events: the back-pressure totals and the meta set since the last batch.
struct BatchMeta {
  uint64_t backpressure_waits = 0;  // the totals so far
  uint64_t backpressure_wait_ns = 0;
  uint64_t dropped_events = 0;
  std::vector<std::pair<std::string, std::string>> meta;
};

BatchMeta take_batch_meta_locked(Recorder& r) {
  BatchMeta b;
  b.backpressure_waits = r.backpressure_waits;
  b.backpressure_wait_ns = r.backpressure_wait_ns;
  b.dropped_events = r.dropped_events;
  b.meta.swap(r.pending_meta);
  return b;
}

// Under write_mutex (one consumer at a time). The merge runs outside the recorder's lock: the slots it reads
// are published and stay put until release_taken_locked gives their chunks back.
void take_round(Recorder& r, uint64_t watermark, WriteRound& round) {
  {
    std::lock_guard lock(r.mutex);
    r.buffers.snapshot_locked(round.sources, kEventsPerTransaction);
  }
  round.events.clear();
  EventBuffers::merge(round.sources, watermark, kEventsPerTransaction, r.last_written_time_ns, round.events);
  std::lock_guard lock(r.mutex);
  r.buffers.release_taken_locked(round.sources);
  round.late.clear();
  r.buffers.take_late_locked(round.late);
  round.stacks = r.stacks.take_new_stacks();
  r.chunk_written.notify_all();  // chunks went back: producers waiting under back-pressure go on
}

// Writes every event stamped at or before `watermark` (and every late event) as transactions of at most
// kEventsPerTransaction events: the write lock is given back between them, so a fork (lock_for_fork) waits for
// one transaction, not for a whole backlog (under back-pressure ~200k events, seconds of SQLite work). Modules
// go in the first transaction (with `scan_modules`); stacks in the transaction of the first event that names
// them, before it; a process killed in between leaves an exact prefix.
// The first failure (a full disk, an I/O error) stops profiling for good: one warning, the failed
// transaction is rolled back by closing the trace, and later events are dropped, so the trace keeps an exact
// prefix of the run (every event up to the last good transaction) instead of a run with holes. Returns
// false when profiling has stopped.
bool write_until(Recorder& r, uint64_t watermark, bool scan_modules) {
  WriteRound& round = r.round;
  std::vector<const EventRecord*> runs;
  std::vector<size_t> lengths;
  for (bool first = true;; first = false) {
    yield_to_fork(r);
    std::lock_guard write_lock(r.write_mutex);
    if (r.write_failed) return false;
    if (!r.writer.is_open() || r.disabled.load(std::memory_order_relaxed)) return true;
    take_round(r, watermark, round);
    runs.assign(1, round.events.data());
    lengths.assign(1, round.events.size());
    for (Chunk* c : round.late) {
      runs.push_back(c->events);
      lengths.push_back(c->published.load(std::memory_order_relaxed));
    }
    const uint64_t devices_before = r.devices_seen;
    for (size_t i = 0; i < runs.size(); ++i) note_devices(r, runs[i], lengths[i]);
    std::vector<unwind::Module> modules;
    if (first && scan_modules) modules = r.modules.scan_new_modules();
    // Decided since the trace was created: said before this batch, which may hold a cross-check's events.
    if (!r.backend_meta_decided && active_backend() != Backend::Undecided) write_backend_meta(r);
    const bool written = r.writer.write_batch(round.stacks, runs.data(), lengths.data(), runs.size(), modules);
    {
      std::lock_guard lock(r.mutex);
      r.buffers.give_back_locked(round.late);
      if (!written) {
        r.disabled = true;  // record() drops events from now on; producers waiting under back-pressure go on
        r.chunk_written.notify_all();
      }
    }
    if (!written) {
      r.write_failed = true;
      warn_once("writing the trace '" + r.trace_path + "' failed (" + r.writer.last_error() +
                "); profiling stopped: the trace keeps the events written before, and the application "
                "continues");
      const std::string reason = stop_reason_for_write_error(r.writer.last_error());
      const bool stored = r.writer.record_stop_reason(reason);
      r.writer.close();  // every committed transaction stays readable
      if (!stored) store_stop_reason(r.trace_path, reason);
      return false;
    }
    sample_pool_peaks(r, runs, lengths);
    size_t committed = 0;
    for (size_t length : lengths) committed += length;
    r.buffers.note_committed(committed);                          // on disk now: a kill from here on loses none of them
    if (r.devices_seen != devices_before) write_devices_meta(r);  // rare: a device seen for the first time
    if (round.events.size() < kEventsPerTransaction) return true;  // nothing left at or before the watermark
  }
}

bool write_batch_meta(Recorder& r, const BatchMeta& batch) {
  if (batch.backpressure_waits == 0 && batch.dropped_events == 0 && batch.meta.empty()) return true;
  yield_to_fork(r);
  std::lock_guard write_lock(r.write_mutex);
  if (r.write_failed) return false;
  if (!r.writer.is_open()) return true;
  if (batch.backpressure_waits > 0) {
    r.writer.set_meta(schema::meta::kBackpressureWaits, std::to_string(batch.backpressure_waits));
    r.writer.set_meta(schema::meta::kBackpressureWaitNs, std::to_string(batch.backpressure_wait_ns));
  }
  if (batch.dropped_events > 0) r.writer.set_meta(schema::meta::kDroppedEvents, std::to_string(batch.dropped_events));
  for (const auto& [key, value] : batch.meta) r.writer.set_meta(key.c_str(), value);
  return true;
}

// What a clean end adds once the last event is written: the backend, the devices, how stacks were walked, the end
// time and, last, complete = 1. Under write_mutex.
void write_end_meta(Recorder& r) {
  r.writer.checkpoint_now();  // an aggregate trace's state, up to the last event, before complete = 1
  write_backend_meta(r);      // decided after the trace was created, in rare orders of first calls
  write_devices_meta(r);
  write_stack_walk_meta(r);
  write_self_cost_meta(r);
  r.writer.set_meta(schema::meta::kEndMonotonicNs, std::to_string(now_ns()));
  r.writer.set_meta(schema::meta::kComplete, "1");
}

// After a batch that served flush tickets: an _exit, _Exit or exec asked for it (flush_before_image_ends), so the
// trace is complete now; or an exec failed since, and it is not any more.
void write_exit_path_meta(Recorder& r, bool served_tickets) {
  const bool failed_exec = r.exec_failed.exchange(false, std::memory_order_acq_rel);
  const bool end = served_tickets && r.complete_requested.load(std::memory_order_acquire);
  if (!failed_exec && !end) return;
  std::lock_guard write_lock(r.write_mutex);
  if (!r.writer.is_open()) return;
  if (end) {
    write_end_meta(r);
  } else {
    r.writer.set_meta(schema::meta::kComplete, "0");
  }
}

// Until the consumer's watermark (its clock less kWatermarkLag) has passed `time_ns`: then every event stamped
// up to then that must come before another one already written has been published long enough to be seen.
void wait_for_watermark_to_pass(uint64_t time_ns) {
  for (uint64_t now = now_ns(); now < time_ns + kWatermarkLag; now = now_ns()) {
    const uint64_t left = time_ns + kWatermarkLag - now;
    timespec pause{0, static_cast<long>(left)};
    nanosleep(&pause, nullptr);
  }
}

// True when the writer has something to do before its next periodic batch.
bool writer_has_work_locked(const Recorder& r) {
  return r.stop_requested || r.buffers.full_chunks_locked() >= kFullChunksToWakeWriter ||
         r.flush_requested.load(std::memory_order_acquire) != r.flush_done.load(std::memory_order_relaxed);
}

void writer_main(Recorder* r) {
  block_hooks_in_this_thread();
  // Named, so that `top -H` and bench/torch_step_ab.py's per-thread columns tell the writer's CPU from the app's.
  pthread_setname_np(pthread_self(), "gmt-writer");
  bool ok;
  {
    std::lock_guard write_lock(r->write_mutex);
    ok = create_trace(*r);
  }
  if (ok) open_control_channel(r->trace_path);  // gpumemtrace ctl: served between batches below
  if (!ok) {
    r->writer_serving.store(false, std::memory_order_release);
    std::lock_guard lock(r->mutex);
    r->disabled = true;
    r->chunk_written.notify_all();
    return;
  }
  for (;;) {
    BatchMeta meta;
    bool stop;
    bool backlog;
    uint64_t serving;  // the signal-flush tickets this batch answers
    yield_to_fork(*r);
    {
      std::unique_lock lock(r->mutex);
      auto deadline = std::chrono::steady_clock::now() + kFlushInterval;
      while (!writer_has_work_locked(*r)) {
        auto now = std::chrono::steady_clock::now();
        if (now >= deadline) break;
        r->wake_writer.wait_for(lock,
                                std::min<std::chrono::steady_clock::duration>(kSignalPollInterval, deadline - now));
      }
      serving = r->flush_requested.load(std::memory_order_acquire);
      meta = take_batch_meta_locked(*r);
      stop = r->stop_requested;
    }
    // A fatal-signal handler's flush must hold every event stamped before it asked, and the last batch every
    // event stamped before the exit (finish() writes only what came after, on the exiting thread).
    if (stop || serving != r->flush_done.load(std::memory_order_relaxed)) {
      wait_for_watermark_to_pass(now_ns());
      std::lock_guard write_lock(r->write_mutex);
      r->writer.request_checkpoint();  // an aggregate trace commits its state with this batch
    }
    const uint64_t looked_at = now_ns();
    bool written = write_until(*r, looked_at - kWatermarkLag, /*scan_modules=*/true) && write_batch_meta(*r, meta);
    if (written) write_exit_path_meta(*r, serving != r->flush_done.load(std::memory_order_relaxed));
    r->flush_done.store(serving, std::memory_order_release);
    calibrate_event_clock();  // at most every 50 ms; the writer wakes at least every 200 ms
    if (stop || !written) break;
    serve_control_requests();
    {
      std::lock_guard lock(r->mutex);
      backlog = r->buffers.full_chunks_locked() >= kFullChunksToWakeWriter;
    }
    // Full chunks whose newest events were too new for this batch: taken once the watermark has passed the
    // time this batch looked (waking again at once could find them still too new, and spin).
    if (backlog) wait_for_watermark_to_pass(looked_at);
  }
  close_control_channel();
  r->writer_serving.store(false, std::memory_order_release);
}

// At exit: every pool's reserved bytes once more, as recorded events of the exiting thread (pool_peaks.h). An atexit
// handler registered when the writer starts, at the process's first event, after the CUDA runtime registered its own
// teardown (the runtime initializes inside the first call we record): so it runs before that teardown. It first
// writes what was recorded until now (as finish() does, one consumer at a time), so that a process that exits before
// the writer's first batch has its pools known and their new peaks sampled while the runtime still answers.
void sample_pools_at_exit() {
  Recorder* r = g_recorder;
  if (!r) return;
  HookScope scope;
  if (!scope.active()) return;
  const uint64_t now = now_ns();
  wait_for_watermark_to_pass(now);
  if (!write_until(*r, now, /*scan_modules=*/false)) return;
  std::vector<PoolPeaks::Pool> pools;
  {
    std::lock_guard write_lock(r->write_mutex);
    pools = r->pool_peaks.pools();
  }
  for (const PoolPeaks::Pool& pool : pools) {
    if (EventRecord e; pool_sample(pool, e)) record(e, /*take_stack=*/false);
  }
}

}  // namespace

namespace detail {

void warn_once(const std::string& message) {
  // One line, written with write(2): no stdio buffering shared with the app.
  std::string line = "gpumemtrace: " + message + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

void start_writer_locked(Recorder& r) {
  r.writer_started = true;
  // Paused (run --paused), the writer starts at the first CUDA call, before the runtime it calls has initialized and
  // registered its teardown: the exit sampling is registered at the resume instead (recorder/pause.cpp).
  if (!g_recording_paused.load(std::memory_order_relaxed)) register_exit_pool_sampling();
  r.writer_serving.store(true, std::memory_order_release);  // requests wait for it while it creates the trace
  // The writer must never take a signal meant for the app: block all of them while creating it.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  r.writer_thread = std::thread(writer_main, &r);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

}  // namespace detail

void register_exit_pool_sampling() {
  static std::atomic<bool> exit_sampling{false};
  if (!exit_sampling.exchange(true)) atexit(sample_pools_at_exit);
}

void finish(bool close) {
  if (!g_recorder) return;
  Recorder& r = *g_recorder;
  g_finishing.store(true, std::memory_order_relaxed);
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

  // The writer has stopped: write what came after its last batch here, synchronously. First every event
  // stamped before now, merged (the wait lets the watermark pass now: recorder/event_buffers.h); then whatever
  // threads still running publish meanwhile, up to the last.
  BatchMeta meta;
  {
    std::lock_guard lock(r.mutex);
    HoldsRecorderLock holds;
    meta = take_batch_meta_locked(r);
  }
  {
    std::lock_guard write_lock(r.write_mutex);
    if (!create_trace(r)) return;
  }
  const uint64_t now = now_ns();
  wait_for_watermark_to_pass(now);
  if (!write_until(r, now, /*scan_modules=*/true) || !write_until(r, UINT64_MAX, false) || !write_batch_meta(r, meta)) {
    return;
  }
  std::lock_guard write_lock(r.write_mutex);
  if (!r.writer.is_open()) return;
  write_end_meta(r);
  if (!close) return;
  r.writer.close();
  std::lock_guard lock(r.mutex);  // under write_mutex: no consumer reads a buffer after this (hand_over_full_chunk)
  r.closed.store(true, std::memory_order_relaxed);
  r.disabled = true;
}

}  // namespace gmt::recorder
