#include "recorder/recorder.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <thread>
#include <vector>

#include "recorder/backend.h"
#include "recorder/guard.h"
#include "recorder/module_map.h"
#include "recorder/settings.h"
#include "recorder/stacks.h"
#include "recorder/trace_writer.h"

namespace gmt::recorder {
namespace {

constexpr size_t kChunkEvents = 4096;
// Past this many full chunks waiting for the writer (~17 MiB of events), producers wait for it: the policy
// is "no event is ever dropped"; the time spent waiting is the price when an app outruns SQLite.
constexpr size_t kMaxPendingChunks = 256;
constexpr auto kFlushInterval = std::chrono::milliseconds(200);

struct Chunk {
  size_t count = 0;
  EventRecord events[kChunkEvents];
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
  std::thread writer_thread;

  std::mutex write_mutex;  // held during SQLite work; fork waits for it so the child inherits no half-write
  TraceWriter writer;
  ModuleMap modules;
  bool trace_created = false;
};

Recorder* g_recorder = new Recorder;

thread_local uint32_t t_thread_id __attribute__((tls_model("initial-exec"))) = 0;

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

// Creates the trace file. Runs in the writer thread (or in finish() when the writer never ran).
bool create_trace(Recorder& r) {
  if (r.trace_created) return r.writer.is_open();
  r.trace_created = true;
  std::string path = trace_path_for_this_process();
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
  write_backend_meta(r);
  r.writer.set_meta(schema::meta::kToolVersion, GMT_VERSION);
  r.writer.set_meta(schema::meta::kDroppedEvents, "0");
  r.writer.set_meta(schema::meta::kComplete, "0");
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
};

Batch take_batch_locked(Recorder& r) {
  Batch b;
  b.chunks.swap(r.full);
  if (r.current && r.current->count > 0) {
    b.chunks.push_back(r.current);
    r.current = nullptr;
  }
  b.stacks = r.stacks.take_new_stacks();
  return b;
}

void write_batch(Recorder& r, Batch& batch) {
  {
    std::lock_guard write_lock(r.write_mutex);
    if (r.writer.is_open()) {
      std::vector<const EventRecord*> runs;
      std::vector<size_t> lengths;
      for (Chunk* c : batch.chunks) {
        runs.push_back(c->events);
        lengths.push_back(c->count);
      }
      std::vector<Module> modules = r.modules.scan_new_modules();
      if (!r.writer.write_batch(batch.stacks, runs.data(), lengths.data(), runs.size(), modules)) {
        warn_once("writing the trace failed (" + r.writer.last_error() + "); events of this batch are lost");
      }
    }
  }
  std::lock_guard lock(r.mutex);
  for (Chunk* c : batch.chunks) r.spare.push_back(c);
  r.chunk_written.notify_all();
}

void writer_main(Recorder* r) {
  block_hooks_in_this_thread();
  bool ok;
  {
    std::lock_guard write_lock(r->write_mutex);
    ok = create_trace(*r);
  }
  if (!ok) {
    std::lock_guard lock(r->mutex);
    r->disabled = true;
    r->chunk_written.notify_all();
    return;
  }
  for (;;) {
    Batch batch;
    bool stop;
    {
      std::unique_lock lock(r->mutex);
      r->wake_writer.wait_for(lock, kFlushInterval, [r] { return r->stop_requested || !r->full.empty(); });
      batch = take_batch_locked(*r);
      stop = r->stop_requested;
    }
    write_batch(*r, batch);
    if (stop) return;
  }
}

void start_writer_locked(Recorder& r) {
  r.writer_started = true;
  // The writer must never take a signal meant for the app: block all of them while creating it.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  r.writer_thread = std::thread(writer_main, &r);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

}  // namespace

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint32_t current_thread_id() {
  if (t_thread_id == 0) t_thread_id = static_cast<uint32_t>(syscall(SYS_gettid));
  return t_thread_id;
}

void record(EventRecord& event, bool take_stack) {
  Recorder& r = *g_recorder;
  RawStack raw;
  if (take_stack && settings().take_stacks) capture_stack(raw);  // outside the lock: the costly part

  std::unique_lock lock(r.mutex);
  if (r.disabled) return;
  if (raw.depth > 0) event.stack_id = r.stacks.intern(raw);
  if (!r.writer_started) start_writer_locked(r);
  if (!r.current) r.current = take_spare_chunk(r);
  r.current->events[r.current->count++] = event;
  if (r.current->count < kChunkEvents) return;
  r.full.push_back(r.current);
  r.current = nullptr;
  r.wake_writer.notify_one();
  // Back-pressure instead of loss. Only while a writer thread is there to drain the queue.
  r.chunk_written.wait(lock, [&r] {
    return r.full.size() <= kMaxPendingChunks || r.disabled || r.stop_requested;
  });
}

void finish(bool close) {
  Recorder& r = *g_recorder;
  HookScope scope;  // whatever SQLite or the loader do from here, the hooks stay out of it
  std::thread writer;
  {
    std::lock_guard lock(r.mutex);
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
    batch = take_batch_locked(r);
    if (close) r.disabled = true;
  }
  {
    std::lock_guard write_lock(r.write_mutex);
    if (!create_trace(r)) return;
  }
  write_batch(r, batch);
  std::lock_guard write_lock(r.write_mutex);
  if (!r.writer.is_open()) return;
  write_backend_meta(r);  // decided after the trace was created, in rare orders of first calls
  r.writer.set_meta(schema::meta::kEndMonotonicNs, std::to_string(now_ns()));
  r.writer.set_meta(schema::meta::kComplete, "1");
  if (close) r.writer.close();
}

void lock_for_fork() {
  g_recorder->write_mutex.lock();
  g_recorder->mutex.lock();
}

void unlock_after_fork_in_parent() {
  g_recorder->mutex.unlock();
  g_recorder->write_mutex.unlock();
}

void reset_after_fork_in_child() {
  // The parent's recorder stays allocated and untouched: its buffers are the parent's to write, its writer
  // thread does not exist here, and its SQLite connection must not be used by two processes.
  g_recorder = new Recorder;
  t_thread_id = 0;
  Settings& s = settings();
  s.start_unix_ns = 0;
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  s.start_unix_ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  s.start_monotonic_ns = now_ns();
}

}  // namespace gmt::recorder
