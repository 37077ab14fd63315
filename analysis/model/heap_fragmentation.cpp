#include "analysis/model/heap_fragmentation.h"

#include <algorithm>
#include <cstdint>

namespace gmt::analysis {

void HeapFragmentationTracker::on_block(HeapLayout& layout, int64_t source, int64_t device, bool alloc,
                                        uint64_t address, uint64_t size, int64_t stack_id, int64_t time_ns) {
  auto block = live_.find({source, address});
  if (block != live_.end()) {  // a free, or an address handed out again without its free recorded
    const Key key{source, block->second.device};
    State& state = heaps_[key];
    advance(layout, key, state, time_ns);
    // The heap is still as it was at its latest peak: its layout is taken now, once per peak, not at every
    // allocation on the way up (HeapLayout::space walks the heap).
    take_pending_peak(layout, key, state);
    state.held -= block->second.size;
    live_.erase(block);
  }
  if (alloc) advance(layout, {source, device}, heaps_[{source, device}], time_ns);
  layout.on_block(source, alloc, address, size);
  if (!alloc) return;
  live_[{source, address}] = Block{device, size, stack_id};
  State& state = heaps_[{source, device}];
  state.held += size;
  if (state.held > state.peak) {
    state.peak = state.held;
    state.peak_time = time_ns;
    state.peak_pending = true;
  }
}

void HeapFragmentationTracker::take_pending_peak(const HeapLayout& layout, const Key& key, State& state) {
  if (!state.peak_pending) return;
  state.at_peak = layout.space(key.first, key.second);
  state.pinned_at_peak = pins(layout, key);
  state.peak_pending = false;
}

void HeapFragmentationTracker::before_segment(const HeapLayout& layout, int64_t source, int64_t device,
                                              int64_t time_ns) {
  for (auto it = heaps_.lower_bound({source, INT64_MIN}); it != heaps_.end() && it->first.first == source; ++it) {
    take_pending_peak(layout, it->first, it->second);
  }
  advance(layout, {source, device}, heaps_[{source, device}], time_ns);
}

size_t HeapFragmentationTracker::bucket_of(int64_t time_ns) {
  const int64_t relative = relative_to(origin_, time_ns);
  if (relative <= 0) return 0;
  while (static_cast<uint64_t>(relative) / static_cast<uint64_t>(bucket_ns_) >= kMaxHeapBuckets) {
    // Twice the width: each new bucket ends where the later of its two old ones did, so it is the heap at its end.
    bucket_ns_ *= 2;
    for (auto& [key, state] : heaps_) {
      std::vector<HeapBucket> merged;
      merged.reserve(state.open / 2);
      for (size_t i = 0; i < state.open / 2; ++i) {
        merged.push_back(state.closed[2 * i + 1]);
        merged.back().time_ns = static_cast<int64_t>(i) * bucket_ns_;
      }
      state.closed = std::move(merged);
      state.open /= 2;
    }
  }
  return static_cast<size_t>(static_cast<uint64_t>(relative) / static_cast<uint64_t>(bucket_ns_));
}

void HeapFragmentationTracker::close_until(State& state, size_t bucket, const HeapSpace& space, int64_t bucket_ns) {
  while (state.closed.size() < bucket) {
    state.closed.push_back(HeapBucket{static_cast<int64_t>(state.closed.size()) * bucket_ns, space.reserved_bytes,
                                      space.held_bytes, space.free_bytes, space.largest_free_bytes});
  }
  state.open = std::max(state.open, bucket);
}

void HeapFragmentationTracker::advance(const HeapLayout& layout, const Key& key, State& state, int64_t time_ns) {
  const size_t bucket = bucket_of(time_ns);
  if (bucket <= state.open) return;  // the same bucket: its end is not yet known
  close_until(state, bucket, layout.space(key.first, key.second), bucket_ns_);
}

HeapFragmentationTracker::Pins HeapFragmentationTracker::pins(const HeapLayout& layout, const Key& key) const {
  Pins result;
  layout.for_each_run(key.first, key.second,
                      [&](const HeapLayout::Run& run, HeapLayout::BlockIterator first, HeapLayout::BlockIterator last) {
                        const uint64_t free_bytes = run.free_bytes();
                        if (free_bytes == 0) return;  // full: nothing to pin
                        for (auto block = first; block != last; ++block) {
                          auto live = live_.find({key.first, block->first});
                          RawPin& pin = result[live == live_.end() ? 0 : live->second.stack_id];
                          ++pin.blocks;
                          pin.bytes += block->second;
                          pin.runs[run.start] = free_bytes;
                        }
                      });
  return result;
}

std::vector<HeapPinGroup> HeapFragmentationTracker::group(const Pins& pins, const StackLoadFn& load_stack,
                                                          const StackKeyFn& stack_key) {
  StackGroups groups(load_stack, stack_key);
  std::vector<HeapPinGroup> result;
  std::vector<std::map<uint64_t, uint64_t>> runs;
  for (const auto& [stack_id, pin] : pins) {  // ascending stack ids: a group's first is its representative
    const uint32_t index = groups.group_of(stack_id);
    if (index == result.size()) {
      result.emplace_back();
      result.back().stack.id = stack_id;
      runs.emplace_back();
    }
    HeapPinGroup& group = result[index];
    group.stack_ids.push_back(stack_id);
    group.blocks += pin.blocks;
    group.bytes += pin.bytes;
    runs[index].insert(pin.runs.begin(), pin.runs.end());
  }
  for (size_t i = 0; i < result.size(); ++i) {
    result[i].stack = load_stack(result[i].stack.id);
    result[i].segments = runs[i].size();
    for (const auto& [start, free_bytes] : runs[i]) result[i].free_bytes += free_bytes;
  }
  std::sort(result.begin(), result.end(), [](const HeapPinGroup& a, const HeapPinGroup& b) {
    if (a.free_bytes != b.free_bytes) return a.free_bytes > b.free_bytes;
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    return a.stack.id < b.stack.id;
  });
  return result;
}

std::vector<HeapFragmentation> HeapFragmentationTracker::finish(const HeapLayout& layout, int64_t end_ns,
                                                                const StackLoadFn& load_stack,
                                                                const StackKeyFn& stack_key) {
  // The last bucket holds the end of the trace (or the heap's latest change, in a trace whose end came earlier).
  size_t last = bucket_of(origin_ + std::max<int64_t>(end_ns, 0));
  for (const auto& [key, state] : heaps_) last = std::max(last, state.open);
  std::vector<HeapFragmentation> result;
  for (auto& [key, state] : heaps_) {
    if (state.peak == 0) continue;
    HeapFragmentation heap;
    heap.source = key.first;
    heap.allocator = heap_allocator_name(key.first);
    heap.device = key.second;
    heap.peak_held_bytes = state.peak;
    heap.peak_time_ns = relative_to(origin_, state.peak_time);
    heap.at_end = layout.space(key.first, key.second);
    const Pins at_end = pins(layout, key);
    const bool at_peak_now = state.peak_pending;  // nothing freed since the peak
    heap.at_peak = at_peak_now ? heap.at_end : state.at_peak;
    heap.pinned_at_peak = group(at_peak_now ? at_end : state.pinned_at_peak, load_stack, stack_key);
    heap.pinned_at_end = group(at_end, load_stack, stack_key);
    close_until(state, last + 1, heap.at_end, bucket_ns_);
    heap.bucket_ns = bucket_ns_;
    heap.over_time = state.closed;
    result.push_back(std::move(heap));
  }
  return result;
}

}  // namespace gmt::analysis
