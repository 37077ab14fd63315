#include "recorder/event_buffers.h"

#include <algorithm>
#include <utility>

namespace gmt::recorder {

EventBuffers::~EventBuffers() {
  for (std::vector<ThreadBuffer*>* buffers : {&in_use_, &reusable_}) {
    for (ThreadBuffer* b : *buffers) {
      for (Chunk* c : b->full) delete c;
      delete b->filling;
      delete b;
    }
  }
  for (Chunk* c : spare_) delete c;
  delete own_counters_;
  for (Chunk* c : late_full_) delete c;
  delete late_filling_;
}

Chunk* EventBuffers::take_spare_locked() {
  if (spare_.empty()) return new Chunk;
  Chunk* c = spare_.back();
  spare_.pop_back();
  return c;  // published is 0: reset when it was given back
}

ThreadBuffer* EventBuffers::register_thread_locked() {
  ThreadBuffer* b;
  if (!reusable_.empty()) {
    b = reusable_.back();
    reusable_.pop_back();
    // Its chunk is empty (it was drained before reuse); its count of events produced goes on.
    ThreadBuffer fresh;
    fresh.filling = b->filling;
    fresh.produced = b->produced;
    fresh.produced_count = b->produced_count;
    fresh.produced_is_shared = b->produced_is_shared;
    *b = std::move(fresh);
  } else {
    b = new ThreadBuffer;
    b->filling = take_spare_locked();
    schema::EventCounters& counters = counters_locked();
    const uint32_t slot = counters.slots_taken.load(std::memory_order_relaxed);
    b->produced_is_shared = slot >= schema::kEventCounterSlots;
    b->produced = b->produced_is_shared ? &counters.produced_shared : &counters.produced[slot].value;
    if (!b->produced_is_shared) counters.slots_taken.store(slot + 1, std::memory_order_relaxed);
    b->produced_count = b->produced->load(std::memory_order_relaxed);
  }
  in_use_.push_back(b);
  return b;
}

schema::EventCounters& EventBuffers::counters_locked() {
  if (!counters_) counters_ = own_counters_ = new schema::EventCounters;
  return *counters_;
}

uint32_t EventBuffers::discard_locked(ThreadBuffer& buffer) {
  // Those the consumer took already (`taken` counts in this chunk while no full one is queued) are its to count.
  const uint32_t published = buffer.filling->published.load(std::memory_order_relaxed);
  const uint32_t taken = buffer.full.empty() ? std::min(buffer.taken, published) : 0;
  counters_locked().discarded.fetch_add(published - taken, std::memory_order_relaxed);
  buffer.filling->published.store(0, std::memory_order_relaxed);
  buffer.filling_published = 0;
  // The chunk starts over: what the consumer took of it is no offset into its new events.
  if (buffer.full.empty()) buffer.taken = 0;
  return published - taken;
}

void EventBuffers::hand_over_locked(ThreadBuffer& buffer) {
  buffer.full.push_back(buffer.filling);
  ++full_chunks_;
  buffer.filling = take_spare_locked();
  buffer.filling_published = 0;
}

bool EventBuffers::append_late_locked(const EventRecord& event) {
  if (!late_filling_) late_filling_ = take_spare_locked();
  const uint32_t n = late_filling_->published.load(std::memory_order_relaxed);
  late_filling_->events[n] = event;
  counters_locked().produced_shared.fetch_add(1, std::memory_order_relaxed);
  late_filling_->published.store(n + 1, std::memory_order_relaxed);  // read under the same lock
  if (n + 1 < kChunkEvents) return false;
  late_full_.push_back(late_filling_);
  late_filling_ = nullptr;
  ++full_chunks_;
  return true;
}

void EventBuffers::snapshot_locked(std::vector<Source>& sources, size_t max_events) const {
  sources.clear();
  for (ThreadBuffer* b : in_use_) {
    Source s;
    s.buffer = b;
    size_t budget = max_events;
    uint32_t from = b->taken;
    for (Chunk* c : b->full) {
      if (budget == 0) break;
      const size_t n = std::min<size_t>(kChunkEvents - from, budget);
      if (n > 0) s.runs.push_back({c->events + from, c->events + from + n});
      budget -= n;
      from = 0;
    }
    if (budget > 0) {
      const uint32_t published = b->filling->published.load(std::memory_order_acquire);
      if (published > from) {
        const size_t n = std::min<size_t>(published - from, budget);
        s.runs.push_back({b->filling->events + from, b->filling->events + from + n});
      }
    }
    if (!s.runs.empty()) sources.push_back(std::move(s));
  }
}

void EventBuffers::merge(std::vector<Source>& sources, uint64_t watermark, size_t max_events, uint64_t& last_time_ns,
                         std::vector<EventRecord>& out) {
  // A min-heap of each source's next event, by (time, source): a thread's events are in time order already.
  // The source on top gives every event that sorts before the next source's head in one go: with one thread
  // recording, or threads taking turns, that is whole runs without touching the heap.
  struct Head {
    uint64_t time;
    size_t source;
    size_t run;
    const EventRecord* at;
  };
  auto later = [](const Head& a, const Head& b) { return a.time != b.time ? a.time > b.time : a.source > b.source; };
  std::vector<Head> heads;
  heads.reserve(sources.size());
  for (size_t s = 0; s < sources.size(); ++s) {
    sources[s].taken = 0;
    const auto& runs = sources[s].runs;
    if (!runs.empty() && runs[0].begin->time_ns <= watermark)
      heads.push_back({runs[0].begin->time_ns, s, 0, runs[0].begin});
  }
  std::make_heap(heads.begin(), heads.end(), later);
  size_t room = max_events;
  while (!heads.empty() && room > 0) {
    std::pop_heap(heads.begin(), heads.end(), later);
    Head& h = heads.back();
    Source& source = sources[h.source];
    // Events of this source go first while they sort before the next head (ties: the lower source first).
    uint64_t bound = watermark;
    bool bound_inclusive = true;
    if (heads.size() > 1 && heads.front().time <= watermark) {
      bound = heads.front().time;
      bound_inclusive = h.source < heads.front().source;
    }
    bool more = true;  // the source has events left
    for (;;) {
      const EventRecord* end = source.runs[h.run].end;
      const EventRecord* at = h.at;
      while (at != end && room > 0 && (at->time_ns < bound || (bound_inclusive && at->time_ns == bound))) {
        EventRecord& e = out.emplace_back(*at++);
        if (e.time_ns < last_time_ns) {
          e.time_ns = last_time_ns;
        } else {
          last_time_ns = e.time_ns;
        }
        --room;
      }
      source.taken += static_cast<size_t>(at - h.at);
      h.at = at;
      if (at != end) break;
      if (++h.run == source.runs.size()) {
        more = false;
        break;
      }
      h.at = source.runs[h.run].begin;  // runs are never empty
    }
    if (!more || h.at->time_ns > watermark) {
      heads.pop_back();
      continue;
    }
    h.time = h.at->time_ns;
    std::push_heap(heads.begin(), heads.end(), later);
  }
}

void EventBuffers::release_taken_locked(const std::vector<Source>& sources) {
  for (const Source& s : sources) {
    ThreadBuffer& b = *s.buffer;
    size_t remaining = s.taken;
    while (remaining > 0 && !b.full.empty()) {
      const size_t step = std::min<size_t>(kChunkEvents - b.taken, remaining);
      b.taken += static_cast<uint32_t>(step);
      remaining -= step;
      if (b.taken < kChunkEvents) break;
      drop_oldest_full_locked(b);
    }
    b.taken += static_cast<uint32_t>(remaining);  // within the chunk being filled
  }
  // Chunks taken whole while still being filled, and handed over since; buffers of exited threads, drained.
  for (size_t i = 0; i < in_use_.size();) {
    ThreadBuffer& b = *in_use_[i];
    if (!b.full.empty() && b.taken == kChunkEvents) {
      drop_oldest_full_locked(b);
      continue;
    }
    if (b.thread_exited && b.full.empty() && b.taken == b.filling->published.load(std::memory_order_relaxed)) {
      b.filling->published.store(0, std::memory_order_relaxed);
      b.taken = 0;
      reusable_.push_back(&b);
      in_use_[i] = in_use_.back();
      in_use_.pop_back();
      continue;
    }
    ++i;
  }
}

void EventBuffers::take_late_locked(std::vector<Chunk*>& late) {
  for (Chunk* c : late_full_) late.push_back(c);
  full_chunks_ -= late_full_.size();
  late_full_.clear();
  if (late_filling_ && late_filling_->published.load(std::memory_order_relaxed) > 0) {
    late.push_back(late_filling_);
    late_filling_ = nullptr;
  }
}

void EventBuffers::give_back_locked(const std::vector<Chunk*>& chunks) {
  for (Chunk* c : chunks) give_back_locked(c);
}

void EventBuffers::give_back_locked(Chunk* chunk) {
  chunk->published.store(0, std::memory_order_relaxed);
  spare_.push_back(chunk);
}

void EventBuffers::drop_oldest_full_locked(ThreadBuffer& buffer) {
  give_back_locked(buffer.full.front());
  buffer.full.erase(buffer.full.begin());  // a handful of pointers, oldest first
  --full_chunks_;
  buffer.taken = 0;
}

}  // namespace gmt::recorder
