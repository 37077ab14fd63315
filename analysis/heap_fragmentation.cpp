#include "analysis/heap_fragmentation.h"

#include <cstdint>

#include "analysis/timeline.h"

namespace gmt::analysis {

void HeapFragmentationTracker::on_block(HeapLayout& layout, int64_t source, int64_t device, bool alloc,
                                        uint64_t address, uint64_t size, int64_t time_ns) {
  auto block = live_.find({source, address});
  if (block != live_.end()) {  // a free, or an address handed out again without its free recorded
    State& state = heaps_[{source, block->second.first}];
    // The heap is still as it was at its latest peak: its layout is taken now, once per peak, not at every
    // allocation on the way up (HeapLayout::space walks the heap).
    take_pending_peak(layout, {source, block->second.first}, state);
    state.held -= block->second.second;
    live_.erase(block);
  }
  layout.on_block(source, alloc, address, size);
  if (!alloc) return;
  live_[{source, address}] = {device, size};
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
  state.peak_pending = false;
}

void HeapFragmentationTracker::before_segment(const HeapLayout& layout, int64_t source) {
  for (auto it = heaps_.lower_bound({source, INT64_MIN}); it != heaps_.end() && it->first.first == source; ++it) {
    take_pending_peak(layout, it->first, it->second);
  }
}

std::vector<HeapFragmentation> HeapFragmentationTracker::finish(const HeapLayout& layout, int64_t origin) const {
  std::vector<HeapFragmentation> result;
  for (const auto& [key, state] : heaps_) {
    if (state.peak == 0) continue;
    HeapFragmentation heap;
    heap.source = key.first;
    heap.allocator = heap_allocator_name(key.first);
    heap.device = key.second;
    heap.peak_held_bytes = state.peak;
    heap.peak_time_ns = relative_to(origin, state.peak_time);
    heap.at_end = layout.space(key.first, key.second);
    heap.at_peak = state.peak_pending ? heap.at_end : state.at_peak;  // nothing freed since the peak
    result.push_back(heap);
  }
  return result;
}

}  // namespace gmt::analysis
