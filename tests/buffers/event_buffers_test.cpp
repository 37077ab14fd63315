// recorder/event_buffers.h alone: what the writer takes from per-thread buffers, in which order, and what
// becomes of chunks and of the buffers of exited threads. Single-threaded here, step by step; the concurrent
// hand-off is recorder_stress's (tests/reliability, under ThreadSanitizer in CI).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "recorder/event_buffers.h"

namespace {

using gmt::recorder::Chunk;
using gmt::recorder::EventBuffers;
using gmt::recorder::EventRecord;
using gmt::recorder::kChunkEvents;
using gmt::recorder::ThreadBuffer;

// Appends an event stamped `time` (its address says which thread and which one it was), handing a full chunk
// over as record() does.
void append(EventBuffers& buffers, ThreadBuffer& b, uint64_t time, uint64_t address) {
  EventRecord e;
  e.time_ns = time;
  e.call.address = address;
  if (!EventBuffers::append(b, e)) buffers.hand_over_locked(b);
}

struct Taken {
  std::vector<EventRecord> events;
  uint64_t last_time_ns = 0;
};

// One round of the writer: snapshot, merge, release.
size_t take(EventBuffers& buffers, uint64_t watermark, size_t max_events, Taken& taken) {
  std::vector<EventBuffers::Source> sources;
  buffers.snapshot_locked(sources, max_events);
  size_t before = taken.events.size();
  EventBuffers::merge(sources, watermark, max_events, taken.last_time_ns, taken.events);
  buffers.release_taken_locked(sources);
  return taken.events.size() - before;
}

std::vector<uint64_t> addresses(const Taken& taken) {
  std::vector<uint64_t> out;
  for (const EventRecord& e : taken.events) out.push_back(e.call.address);
  return out;
}

TEST(EventBuffers, MergesThreadsByTimeAndTiesInRegistrationOrder) {
  EventBuffers buffers;
  ThreadBuffer* a = buffers.register_thread_locked();
  ThreadBuffer* b = buffers.register_thread_locked();
  append(buffers, *a, 10, 0xa1);
  append(buffers, *b, 5, 0xb1);
  append(buffers, *a, 20, 0xa2);
  append(buffers, *b, 20, 0xb2);  // the same time as a's second: a registered first, so a's goes first
  append(buffers, *b, 30, 0xb3);
  Taken taken;
  EXPECT_EQ(take(buffers, 100, 4096, taken), 5u);
  EXPECT_EQ(addresses(taken), (std::vector<uint64_t>{0xb1, 0xa1, 0xa2, 0xb2, 0xb3}));
  EXPECT_EQ(taken.last_time_ns, 30u);
  EXPECT_EQ(take(buffers, 100, 4096, taken), 0u);  // each event once
}

TEST(EventBuffers, LeavesEventsAfterTheWatermarkForTheNextRound) {
  EventBuffers buffers;
  ThreadBuffer* a = buffers.register_thread_locked();
  ThreadBuffer* b = buffers.register_thread_locked();
  append(buffers, *a, 10, 0xa1);
  append(buffers, *a, 50, 0xa2);
  append(buffers, *b, 40, 0xb1);
  Taken taken;
  EXPECT_EQ(take(buffers, 40, 4096, taken), 2u);
  EXPECT_EQ(addresses(taken), (std::vector<uint64_t>{0xa1, 0xb1}));
  append(buffers, *b, 45, 0xb2);  // published after the round, stamped before a's waiting one
  EXPECT_EQ(take(buffers, 100, 4096, taken), 2u);
  EXPECT_EQ(addresses(taken), (std::vector<uint64_t>{0xa1, 0xb1, 0xb2, 0xa2}));
}

TEST(EventBuffers, ALatePublicationTakesTheTimeOfTheLastEventWritten) {
  // A thread stalled between its clock read and its append: by then events stamped after it were written.
  EventBuffers buffers;
  ThreadBuffer* a = buffers.register_thread_locked();
  ThreadBuffer* b = buffers.register_thread_locked();
  append(buffers, *a, 100, 0xa1);
  append(buffers, *a, 200, 0xa2);
  Taken taken;
  EXPECT_EQ(take(buffers, 250, 4096, taken), 2u);
  append(buffers, *b, 150, 0xb1);  // stamped at 150, published now
  append(buffers, *b, 260, 0xb2);
  EXPECT_EQ(take(buffers, 300, 4096, taken), 2u);
  ASSERT_EQ(addresses(taken), (std::vector<uint64_t>{0xa1, 0xa2, 0xb1, 0xb2}));
  EXPECT_EQ(taken.events[2].time_ns, 200u);  // raised to a2's: times never go backwards in the trace
  EXPECT_EQ(taken.events[3].time_ns, 260u);
}

TEST(EventBuffers, TakesAtMostMaxEventsPerRoundAcrossChunkBoundaries) {
  EventBuffers buffers;
  ThreadBuffer* a = buffers.register_thread_locked();
  ThreadBuffer* b = buffers.register_thread_locked();
  const uint64_t per_thread = 2 * kChunkEvents + 100;  // two full chunks and part of a third each
  for (uint64_t i = 0; i < per_thread; ++i) {
    append(buffers, *a, 2 * i, 0xa00000 + i);
    append(buffers, *b, 2 * i + 1, 0xb00000 + i);
  }
  EXPECT_EQ(buffers.full_chunks_locked(), 4u);
  Taken taken;
  size_t rounds = 0;
  while (take(buffers, UINT64_MAX, 1000, taken) == 1000) ++rounds;
  EXPECT_EQ(rounds, 2 * per_thread / 1000);
  ASSERT_EQ(taken.events.size(), 2 * per_thread);
  for (uint64_t i = 0; i < taken.events.size(); ++i) {
    ASSERT_EQ(taken.events[i].time_ns, i) << "event " << i;
    ASSERT_EQ(taken.events[i].call.address, (i % 2 ? 0xb00000 : 0xa00000) + i / 2) << "event " << i;
  }
  EXPECT_EQ(buffers.full_chunks_locked(), 0u);  // every full chunk taken whole went back
}

TEST(EventBuffers, AChunkTakenWholeWhileBeingFilledGoesBackOnceHandedOver) {
  EventBuffers buffers;
  ThreadBuffer* a = buffers.register_thread_locked();
  for (uint64_t i = 0; i + 1 < kChunkEvents; ++i) append(buffers, *a, i, i);
  Taken taken;
  EXPECT_EQ(take(buffers, UINT64_MAX, 4096, taken), kChunkEvents - 1);
  // Between the writer's snapshot and its release the thread fills the chunk and hands it over.
  std::vector<EventBuffers::Source> sources;
  buffers.snapshot_locked(sources, 4096);
  append(buffers, *a, kChunkEvents - 1, kChunkEvents - 1);
  append(buffers, *a, kChunkEvents, kChunkEvents);  // into the fresh chunk, after the snapshot
  EXPECT_EQ(buffers.full_chunks_locked(), 1u);
  EventBuffers::merge(sources, UINT64_MAX, 4096, taken.last_time_ns, taken.events);
  buffers.release_taken_locked(sources);
  EXPECT_EQ(taken.events.size(), kChunkEvents - 1);  // the snapshot saw none of the two
  EXPECT_EQ(take(buffers, UINT64_MAX, 4096, taken), 2u);
  ASSERT_EQ(taken.events.size(), kChunkEvents + 1);
  for (uint64_t i = 0; i < taken.events.size(); ++i) ASSERT_EQ(taken.events[i].call.address, i);
  EXPECT_EQ(buffers.full_chunks_locked(), 0u);
}

TEST(EventBuffers, AnExitedThreadsBufferIsReusedOnlyOnceDrained) {
  EventBuffers buffers;
  ThreadBuffer* a = buffers.register_thread_locked();
  append(buffers, *a, 10, 0xa1);
  append(buffers, *a, 20, 0xa2);
  EventBuffers::thread_exited_locked(*a);
  Taken taken;
  EXPECT_EQ(take(buffers, 15, 4096, taken), 1u);
  EXPECT_EQ(buffers.buffers_in_use_locked(), 1u);  // a2 is still in it
  ThreadBuffer* b = buffers.register_thread_locked();
  EXPECT_NE(b, a);
  EXPECT_EQ(take(buffers, 100, 4096, taken), 1u);
  EXPECT_EQ(buffers.buffers_in_use_locked(), 1u);  // b's
  ThreadBuffer* c = buffers.register_thread_locked();
  EXPECT_EQ(c, a);  // drained: reused, empty, with the time order of a new thread
  EXPECT_EQ(c->last_time_ns, 0u);
  append(buffers, *c, 5, 0xc1);
  EXPECT_EQ(take(buffers, 100, 4096, taken), 1u);
  EXPECT_EQ(addresses(taken), (std::vector<uint64_t>{0xa1, 0xa2, 0xc1}));
  EXPECT_EQ(taken.events[2].time_ns, 20u);  // stamped before what was written: raised
}

TEST(EventBuffers, LateEventsStayInArrivalOrderApartFromTheMerge) {
  EventBuffers buffers;
  std::vector<Chunk*> late;
  buffers.take_late_locked(late);
  EXPECT_TRUE(late.empty());
  for (uint64_t i = 0; i < kChunkEvents + 3; ++i) {
    EventRecord e;
    e.time_ns = 1000 - i % 7;  // their own times, not ordered against anything
    e.call.address = i;
    buffers.append_late_locked(e);
  }
  EXPECT_EQ(buffers.full_chunks_locked(), 1u);  // counted for back-pressure
  buffers.take_late_locked(late);
  EXPECT_EQ(buffers.full_chunks_locked(), 0u);
  ASSERT_EQ(late.size(), 2u);
  ASSERT_EQ(late[0]->published.load(), kChunkEvents);
  ASSERT_EQ(late[1]->published.load(), 3u);
  EXPECT_EQ(late[1]->events[2].call.address, kChunkEvents + 2);
  EXPECT_EQ(late[0]->events[5].time_ns, 995u);  // untouched
  buffers.give_back_locked(late);
  late.clear();
  buffers.take_late_locked(late);
  EXPECT_TRUE(late.empty());
}

// The counts `run` reads after a SIGKILL (schema/event_counters.h): each thread counts in a slot of its own, an
// exited thread's reused buffer counts on in its slot, late events and slotless threads in the shared count, and
// what is committed or discarded is no longer pending.
TEST(EventBuffers, CountsEventsProducedCommittedAndDiscarded) {
  gmt::schema::EventCounters counters;
  EventBuffers buffers;
  buffers.use_counters_locked(&counters);
  ThreadBuffer* a = buffers.register_thread_locked();
  ThreadBuffer* b = buffers.register_thread_locked();
  for (uint64_t i = 0; i < 3; ++i) append(buffers, *a, 10 + i, 0xa0 + i);
  for (uint64_t i = 0; i < 2; ++i) append(buffers, *b, 10 + i, 0xb0 + i);
  EXPECT_EQ(counters.slots_taken.load(), 2u);
  EXPECT_EQ(counters.produced[0].value.load(), 3u);
  EXPECT_EQ(counters.produced[1].value.load(), 2u);
  EXPECT_EQ(counters.pending(), 5u);
  Taken taken;
  EXPECT_EQ(take(buffers, 100, 4096, taken), 5u);
  EXPECT_EQ(counters.pending(), 5u);  // taken, not yet committed: a kill now loses them
  buffers.note_committed(5);
  EXPECT_EQ(counters.pending(), 0u);

  append(buffers, *a, 20, 0xa9);
  buffers.discard_locked(*a);  // profiling stopped: dropped on purpose, not lost
  EXPECT_EQ(counters.discarded.load(), 1u);
  EXPECT_EQ(counters.pending(), 0u);

  EventRecord late;
  late.time_ns = 1;
  buffers.append_late_locked(late);
  EXPECT_EQ(counters.produced_shared.load(), 1u);
  EXPECT_EQ(counters.pending(), 1u);

  EventBuffers::thread_exited_locked(*b);
  EXPECT_EQ(take(buffers, 100, 4096, taken), 0u);  // drains b: its buffer is reusable
  ThreadBuffer* c = buffers.register_thread_locked();
  EXPECT_EQ(c, b);
  append(buffers, *c, 30, 0xc0);
  EXPECT_EQ(counters.produced[1].value.load(), 3u);
  EXPECT_EQ(counters.slots_taken.load(), 2u);

  // After the discard a's chunk starts over at its first slot (append keeps its own copy of the chunk's count,
  // reset with it), and a's slot counts on from where it was.
  append(buffers, *a, 40, 0xaa);
  EXPECT_EQ(counters.produced[0].value.load(), 5u);
  Taken after;
  EXPECT_EQ(take(buffers, 100, 4096, after), 2u);
  EXPECT_EQ(addresses(after), (std::vector<uint64_t>{0xc0, 0xaa}));
  ASSERT_EQ(a->filling->published.load(), 1u);
  EXPECT_EQ(a->filling->events[0].call.address, 0xaau);
}

// A chunk filled to its end is handed over and the next event goes into the first slot of a fresh one, however
// many chunks a thread fills.
TEST(EventBuffers, EachChunkIsFilledFromItsFirstSlot) {
  EventBuffers buffers;
  ThreadBuffer* a = buffers.register_thread_locked();
  for (uint64_t i = 0; i < 2 * kChunkEvents + 5; ++i) append(buffers, *a, 10 + i, i);
  EXPECT_EQ(buffers.full_chunks_locked(), 2u);
  ASSERT_EQ(a->filling->published.load(), 5u);
  EXPECT_EQ(a->filling->events[0].call.address, 2 * kChunkEvents);
  Taken taken;
  EXPECT_EQ(take(buffers, 1u << 30, 4 * kChunkEvents, taken), 2 * kChunkEvents + 5);
  for (uint64_t i = 0; i < taken.events.size(); ++i) ASSERT_EQ(taken.events[i].call.address, i);
}

}  // namespace
