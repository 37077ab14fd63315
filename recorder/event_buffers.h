// Per-thread event buffers, and their merge into the trace's one time-ordered stream.
//
// Why per thread: with one buffer behind one lock, every event of every thread took the same mutex, and with
// 8 threads allocating at once on the H200 the hooks cost 1.46x a raw cudaMallocAsync pair where CUPTI (whose
// callbacks run while the driver already serializes the threads) cost 1.21x: the threads queued a second time
// on our lock (docs/benchmarks.md). Here an event is a copy into the thread's own chunk and one release store;
// a lock is taken once per chunk (kChunkEvents events), for a new stack, and by the writer.
//
// Why the merge keeps the trace causal: the trace's promise is that events.id order is time order and that a
// free of an address comes before its next allocation (docs/trace-format.md, events_time_ordered). Each
// thread's events are in time order in its buffer. The consumer (the writer thread) takes, from every buffer,
// the events stamped at or before a watermark W = (its clock read before it looks at any buffer) - kWatermarkLag,
// and merges them by time. An event E that must precede an event F of another thread (E frees what F then
// allocates; E allocates what F frees) was published before F's clock was read: a free is recorded before the
// memory is released and an allocation after it was granted. So if F is at or before W, E was published at least
// kWatermarkLag before the consumer looked, long visible (a store is visible to other cores within
// microseconds), and is taken in the same merge or an earlier one. An event published later than the consumer
// looked for it (its thread was preempted between its clock read and its publication) precedes nothing already
// written; it is written with the time of the last event written before it (as the one-lock design did), so
// times never go backwards in the trace.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "recorder/event.h"
#include "schema/event_counters.h"

namespace gmt::recorder {

// Events per chunk: a thread's buffer is one chunk being filled plus full ones waiting for the writer.
// 1024 x 88 B = 90 KB per recording thread (apps record from a few threads; an exited thread's buffer is reused).
inline constexpr size_t kChunkEvents = 1024;
// How far behind its own clock the consumer stays (see above): far longer than a store takes to be seen by
// another core, short enough that events wait in the buffers only this much longer.
inline constexpr uint64_t kWatermarkLag = 1'000'000;  // ns

struct Chunk {
  Chunk() {}  // slots stay unconstructed: each below `published` was copied in whole
  // Events [0, published) are complete. The filling thread stores it (release) after each event; the consumer
  // loads it (acquire) and reads only slots below it, which never change until the chunk is given back.
  std::atomic<uint32_t> published{0};
  union {
    EventRecord events[kChunkEvents];
  };
};

// One recording thread's buffer. Fields are owned as marked; "the lock" is the owner's (Recorder::mutex). The
// filling thread's fields have a cache line of their own: the consumer's writes to the others would otherwise
// cost the thread a miss on its next event.
struct alignas(64) ThreadBuffer {
  // The filling thread writes `filling`'s slots without a lock and replaces `filling` under the lock.
  Chunk* filling = nullptr;
  // The filling thread's copy of filling->published (reset with it under the lock), and of its own count of events
  // produced (*produced while that is its own slot): append then loads only this line, and the chunk's header and
  // the counter's slot, which other threads and processes read, are only stored to. With the app's own work between
  // two events, each load of theirs was a cache miss.
  uint32_t filling_published = 0;
  uint64_t produced_count = 0;
  uint64_t last_time_ns = 0;  // the filling thread's own: times never go backwards within one thread
  // The filling thread's own: bit d, this thread has seen device d's description claimed (Recorder::
  // devices_claimed), so that an event reads this line and not the recorder's.
  uint64_t devices_known_claimed = 0;
  // This buffer's count of events produced (schema/event_counters.h): its own slot, which only the filling thread
  // writes, or the shared count when the slots ran out (then `produced_is_shared`, and it is added to atomically).
  std::atomic<uint64_t>* produced = nullptr;
  bool produced_is_shared = false;
  // Under the lock.
  alignas(64) std::vector<Chunk*> full;  // oldest first; the filling thread put them here, the consumer takes them
  bool thread_exited = false;
  // The consumer's own: events of the oldest chunk (full.front(), else filling) already taken.
  uint32_t taken = 0;
};

// The buffers of one process's recorder. Methods named _locked are called with the owner's lock held; the
// consumer's methods by one consumer at a time (the owner's write lock).
class EventBuffers {
 public:
  EventBuffers() = default;
  EventBuffers(const EventBuffers&) = delete;
  EventBuffers& operator=(const EventBuffers&) = delete;
  // Frees every chunk and buffer it holds. The recorder's are never destroyed (the hooks may run until the
  // process is gone); a test's are.
  ~EventBuffers();

  // A buffer for the calling thread, with an empty chunk (a drained one of an exited thread when there is one).
  ThreadBuffer* register_thread_locked();
  // The thread will record no more (its exit): its buffer is reused once the consumer has taken everything.
  static void thread_exited_locked(ThreadBuffer& buffer) { buffer.thread_exited = true; }

  // The filling thread: appends `event` and publishes it. Returns the next free slot, or nullptr when the chunk
  // is now full: then call hand_over_locked before appending again.
  static EventRecord* append(ThreadBuffer& buffer, const EventRecord& event) {
    Chunk* c = buffer.filling;
    const uint32_t n = buffer.filling_published;
    c->events[n] = event;
    // Counted before it is published (the release store below orders the two): the writer can commit only
    // events already counted, so produced never trails committed, even in a file read after a SIGKILL.
    if (__builtin_expect(!buffer.produced_is_shared, 1)) {
      buffer.produced->store(++buffer.produced_count, std::memory_order_relaxed);
    } else {
      buffer.produced->fetch_add(1, std::memory_order_relaxed);
    }
    c->published.store(n + 1, std::memory_order_release);
    buffer.filling_published = n + 1;
    return n + 1 < kChunkEvents ? &c->events[n + 1] : nullptr;
  }
  // Queues the thread's full chunk for the consumer and gives the thread a fresh one.
  void hand_over_locked(ThreadBuffer& buffer);
  // Drops the thread's published events instead (profiling has stopped, or dropped_events counts them): the
  // chunk is reused as it is. They are counted as discarded, not as lost at the exit. Returns how many were
  // dropped (those the consumer had not taken). Only while no consumer reads the chunk: the caller holds the
  // write lock, or no consumer reads any more.
  uint32_t discard_locked(ThreadBuffer& buffer);
  // Whether a consumer reading a snapshot of at most `max_events` per buffer (snapshot_locked) cannot be reading
  // the thread's filling chunk: its full chunks alone fill the snapshot. While a consumer reads, they only grow.
  static bool filling_beyond_snapshot_locked(const ThreadBuffer& buffer, size_t max_events) {
    return buffer.full.size() * kChunkEvents >= max_events + kChunkEvents;
  }

  // The counts of events produced and committed (schema/event_counters.h): `counters` (run's shared file), set
  // before any thread records; without it, private ones of this object's own.
  void use_counters_locked(schema::EventCounters* counters) { counters_ = counters; }
  // The writer, after a transaction holding `events` events committed.
  void note_committed(uint64_t events) {
    if (counters_) counters_->committed.fetch_add(events, std::memory_order_relaxed);
  }

  // Events that arrive late with times of their own (record_late): kept apart, in arrival order, never
  // merged by time with the rest (their times may be seconds old). Under the lock. True when a chunk of them is
  // now full (counted in full_chunks_locked).
  bool append_late_locked(const EventRecord& event);
  // Full chunks waiting for the consumer, late ones included: the measure of back-pressure.
  size_t full_chunks_locked() const { return full_chunks_; }

  // The consumer's view of one buffer for one merge: its untaken events, oldest first, as runs of chunk slots.
  struct Source {
    ThreadBuffer* buffer = nullptr;
    struct Run {
      const EventRecord* begin;
      const EventRecord* end;
    };
    std::vector<Run> runs;
    size_t taken = 0;  // set by merge(): events of the runs, from the first, that it took
  };
  // Every buffer's untaken published events, at most `max_events` of each.
  void snapshot_locked(std::vector<Source>& sources, size_t max_events) const;
  // Without the lock: at most `max_events` of the sources' events stamped at or before `watermark`, in time
  // order (ties: in source order), appended to `out`. `last_time_ns` is the time of the last event the
  // consumer wrote: an earlier time is raised to it (a late publication, above), and it is advanced.
  static void merge(std::vector<Source>& sources, uint64_t watermark, size_t max_events, uint64_t& last_time_ns,
                    std::vector<EventRecord>& out);
  // Marks what merge() took as taken; full chunks taken whole go back to the spare list, and so do the
  // buffers of exited threads that hold nothing more.
  void release_taken_locked(const std::vector<Source>& sources);
  // Every late chunk with events (the one being filled too); give them back when written.
  void take_late_locked(std::vector<Chunk*>& late);
  void give_back_locked(const std::vector<Chunk*>& chunks);

  // For tests and the footprint: buffers in use (threads that recorded and whose buffers are not drained).
  size_t buffers_in_use_locked() const { return in_use_.size(); }

 private:
  Chunk* take_spare_locked();
  void give_back_locked(Chunk* chunk);
  void drop_oldest_full_locked(ThreadBuffer& buffer);  // taken whole: back to the spare list

  schema::EventCounters& counters_locked();

  schema::EventCounters* counters_ = nullptr;
  schema::EventCounters* own_counters_ = nullptr;  // the private ones, when nobody set counters_
  std::vector<ThreadBuffer*> in_use_;
  std::vector<ThreadBuffer*> reusable_;  // drained buffers of exited threads
  std::vector<Chunk*> spare_;
  std::vector<Chunk*> late_full_;
  Chunk* late_filling_ = nullptr;
  size_t full_chunks_ = 0;
};

}  // namespace gmt::recorder
