#include "analysis/model/ranges.h"

#include <algorithm>

#include "analysis/read/ranges.h"

namespace gmt::analysis {
namespace {

void remove_value(std::vector<uint32_t>& values, uint32_t value) {
  auto at = std::find(values.begin(), values.end(), value);
  if (at != values.end()) {
    *at = values.back();
    values.pop_back();
  }
}

void insert_key(std::vector<uint32_t>& keys, uint32_t key) {
  if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
}

}  // namespace

RangeTracker::RangeTracker(const TraceFile& trace, const EventFilters& filters, std::optional<int64_t> trace_pid) {
  keys_.emplace_back();
  keys_[0].stats.none = true;
  named_.push_back(false);
  has_table_ = trace.has_table("ranges");
  if (!has_table_) return;
  if (filters.pid && filters.pid != trace_pid) return;  // another process: nothing is analyzed
  load(trace, filters);
}

uint32_t RangeTracker::key_of(const std::string& domain, const std::string& name) {
  auto [it, inserted] = key_by_name_.try_emplace({domain, name}, static_cast<uint32_t>(keys_.size()));
  if (inserted) {
    keys_.emplace_back();
    keys_.back().stats.domain = domain;
    keys_.back().stats.name = name;
    named_.push_back(false);
  }
  return it->second;
}

void RangeTracker::load(const TraceFile& trace, const EventFilters& filters) {
  // Occurrences outside --since/--until are left out, like the events there.
  int64_t since = INT64_MIN;
  int64_t until = INT64_MAX;
  if (filters.since_ns || filters.until_ns) {
    const int64_t origin = trace_origin(trace);
    if (filters.since_ns) since = origin + *filters.since_ns;
    if (filters.until_ns) until = origin + *filters.until_ns;
  }
  // Without strings (trace_tables.h) every range is nameless: the report then shows one bucket for all of them.
  read_ranges(trace, [&](const RangeRow& row) {
    Occurrence occurrence;
    occurrence.id = row.id;
    occurrence.thread_id = row.thread_id;
    occurrence.start_ns = row.start_ns;
    // A damaged row ending before it starts is taken as ending when it starts.
    occurrence.end_ns = row.end_ns ? std::max(*row.end_ns, occurrence.start_ns) : kOpen;
    occurrence.depth = row.depth < 0 ? -1 : row.depth;
    const std::string& name = row.name;
    if (filters.range && name == *filters.range) named_exists_ = true;
    if (occurrence.end_ns < since || occurrence.start_ns > until) return;
    occurrence.key = key_of(row.domain, name);
    if (filters.range && name == *filters.range) named_[occurrence.key] = true;
    KeyState& key = keys_[occurrence.key];
    ++key.stats.repetitions;
    if (occurrence.end_ns != kOpen) ++key.ends_total;
    occurrences_.push_back(occurrence);
  });
  for (KeyState& key : keys_) key.repeated = key.ends_total >= kMinRangeRepetitions;
}

void RangeTracker::advance_slow(int64_t time_ns) {
  while (next_ < occurrences_.size() && occurrences_[next_].start_ns <= time_ns) {
    open(static_cast<uint32_t>(next_++));
  }
  while (!ends_.empty() && ends_.top().first < time_ns) {
    const uint32_t index = ends_.top().second;
    ends_.pop();
    close(index);
  }
}

void RangeTracker::open(uint32_t index) {
  const Occurrence& occurrence = occurrences_[index];
  if (occurrence.depth >= 0) {
    open_on_thread_[occurrence.thread_id].push_back(index);
  } else {
    open_start_end_.push_back(index);
  }
  open_all_.push_back(index);
  RangeStats& stats = keys_[occurrence.key].stats;
  stats.peak_live_bytes = std::max(stats.peak_live_bytes, live_bytes_);
  if (occurrence.end_ns != kOpen) ends_.emplace(occurrence.end_ns, index);
}

void RangeTracker::close(uint32_t index) {
  const Occurrence& occurrence = occurrences_[index];
  if (occurrence.depth >= 0) {
    remove_value(open_on_thread_[occurrence.thread_id], index);
  } else {
    remove_value(open_start_end_, index);
  }
  remove_value(open_all_, index);
  KeyState& key = keys_[occurrence.key];
  if (!key.repeated) return;
  key.live_at_end.push_back(key.live_inside);
  // The stacks are compared between the end of the first repetition after the warm-up and the last one.
  if (key.ends_seen == 1) key.first_snapshot = key.live_by_stack;
  if (key.ends_seen + 1 == key.ends_total) key.last_snapshot = key.live_by_stack;
  ++key.ends_seen;
}

bool RangeTracker::inside_named(int64_t thread_id) const {
  auto on_thread = open_on_thread_.find(thread_id);
  if (on_thread != open_on_thread_.end()) {
    for (uint32_t index : on_thread->second) {
      if (named_[occurrences_[index].key]) return true;
    }
  }
  for (uint32_t index : open_start_end_) {
    if (named_[occurrences_[index].key]) return true;
  }
  return false;
}

void RangeTracker::on_alloc(int64_t thread_id, uint64_t address, uint64_t size, int64_t stack_id, bool counted) {
  if (occurrences_.empty()) return;  // no ranges: nothing to attribute
  Allocation allocation{size, stack_id, 0, counted, {}};
  const Occurrence* innermost = nullptr;
  auto later = [](const Occurrence* a, const Occurrence& b) {
    return !a || b.start_ns > a->start_ns || (b.start_ns == a->start_ns && b.id > a->id);
  };
  auto on_thread = open_on_thread_.find(thread_id);
  if (on_thread != open_on_thread_.end()) {
    for (uint32_t index : on_thread->second) {
      const Occurrence& occurrence = occurrences_[index];
      if (later(innermost, occurrence)) innermost = &occurrence;
      insert_key(allocation.inside, occurrence.key);
    }
  }
  const Occurrence* from_other_thread = nullptr;
  for (uint32_t index : open_start_end_) {
    const Occurrence& occurrence = occurrences_[index];
    if (occurrence.thread_id == thread_id) {
      if (later(innermost, occurrence)) innermost = &occurrence;
    } else if (later(from_other_thread, occurrence)) {
      from_other_thread = &occurrence;
    }
    insert_key(allocation.inside, occurrence.key);
  }
  if (!innermost) innermost = from_other_thread;
  allocation.bucket = innermost ? innermost->key : 0;
  RangeStats& bucket = keys_[allocation.bucket].stats;
  ++bucket.allocations;
  bucket.allocated_bytes += size;
  if (address == 0) return;  // a zero-byte allocation with no address: never live

  for (uint32_t key : allocation.inside) {
    KeyState& state = keys_[key];
    state.live_inside += size;
    if (state.repeated) state.live_by_stack[stack_id] += size;
  }
  if (counted) {
    live_bytes_ += size;
    for (uint32_t index : open_all_) {
      RangeStats& stats = keys_[occurrences_[index].key].stats;
      stats.peak_live_bytes = std::max(stats.peak_live_bytes, live_bytes_);
    }
  }
  auto [it, inserted] = live_.try_emplace(address);
  if (!inserted) forget(it->second);  // its free was never recorded (the model counts an inconsistency)
  it->second = std::move(allocation);
}

void RangeTracker::forget(const Allocation& allocation) {
  for (uint32_t key : allocation.inside) {
    KeyState& state = keys_[key];
    state.live_inside -= allocation.size;
    if (state.repeated) {
      auto held = state.live_by_stack.find(allocation.stack_id);
      if (held != state.live_by_stack.end() && (held->second -= allocation.size) == 0) state.live_by_stack.erase(held);
    }
  }
  if (allocation.counted) live_bytes_ -= allocation.size;
}

void RangeTracker::on_free(uint64_t address) {
  auto it = live_.find(address);
  if (it == live_.end()) return;
  RangeStats& bucket = keys_[it->second.bucket].stats;
  ++bucket.frees;
  bucket.freed_bytes += it->second.size;
  forget(it->second);
  live_.erase(it);
}

}  // namespace gmt::analysis
