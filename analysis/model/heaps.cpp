#include "analysis/model/heaps.h"

#include <algorithm>
#include <iterator>
#include <limits>

namespace gmt::analysis {
namespace {

uint64_t end_of(uint64_t address, uint64_t size) {
  return size > std::numeric_limits<uint64_t>::max() - address ? std::numeric_limits<uint64_t>::max() : address + size;
}

}  // namespace

bool is_heap_source(int64_t source) {
  return source == static_cast<int64_t>(schema::Source::TorchAllocator) ||
         source == static_cast<int64_t>(schema::Source::NvtxMemory) ||
         source == static_cast<int64_t>(schema::Source::CupyAllocator);
}

bool is_block_kind(schema::MemoryKind kind) {
  return kind == schema::MemoryKind::TensorBlock || kind == schema::MemoryKind::HeapBlock;
}

std::string heap_allocator_name(int64_t source) {
  if (source == static_cast<int64_t>(schema::Source::TorchAllocator)) return "PyTorch's caching allocator";
  if (source == static_cast<int64_t>(schema::Source::NvtxMemory)) return "an NVTX-memory-API heap";
  if (source == static_cast<int64_t>(schema::Source::CupyAllocator)) return "CuPy's memory pool";
  return "a framework allocator";
}

void HeapBacking::on_cuda_alloc(int64_t event_id, uint64_t address, uint64_t size) {
  live_[address] = Range{end_of(address, std::max<uint64_t>(size, 1)), event_id};
}

void HeapBacking::on_cuda_free(uint64_t address) { live_.erase(address); }

void HeapBacking::on_vmm_create(int64_t event_id, uint64_t handle) { handle_creates_[handle] = event_id; }

void HeapBacking::on_vmm_map(uint64_t address, uint64_t size, uint64_t handle) {
  auto create = handle_creates_.find(handle);
  if (create != handle_creates_.end()) on_cuda_alloc(create->second, address, size);
}

void HeapBacking::on_vmm_unmap(uint64_t address) { live_.erase(address); }

void HeapBacking::on_segment(int64_t source, bool alloc, uint64_t address, uint64_t size) {
  if (!alloc) return;  // an allocation that once backed a heap stays the allocator's until it is freed
  segments_seen_ = true;
  const uint64_t end = end_of(address, std::max<uint64_t>(size, 1));
  // Every live range that overlaps [address, end): the one starting at or before it, and those starting inside.
  auto it = live_.upper_bound(address);
  if (it != live_.begin() && std::prev(it)->second.end > address) --it;
  for (; it != live_.end() && it->first < end; ++it) backing_.try_emplace(it->second.event_id, source);
}

void HeapLayout::on_segment(int64_t source, bool alloc, uint64_t address, uint64_t size, int64_t device, bool mapped) {
  if (alloc) {
    segments_[address] = Segment{size, source, device, mapped};
    return;
  }
  // A segment given back whole, or (expandable segments) a part of a mapped range unmapped: what is left stays.
  auto it = segments_.upper_bound(address);
  if (it == segments_.begin()) return;
  --it;
  const uint64_t start = it->first;
  const Segment segment = it->second;
  const uint64_t segment_end = end_of(start, segment.size);
  if (address >= segment_end) return;
  const uint64_t freed_end = size == 0 ? segment_end : std::min(segment_end, end_of(address, size));
  segments_.erase(it);
  if (address > start) segments_[start] = Segment{address - start, segment.source, segment.device, segment.mapped};
  if (freed_end < segment_end) {
    segments_[freed_end] = Segment{segment_end - freed_end, segment.source, segment.device, segment.mapped};
  }
}

void HeapLayout::on_block(int64_t source, bool alloc, uint64_t address, uint64_t size) {
  if (alloc) {
    blocks_[source][address] = size;
  } else {
    auto heap = blocks_.find(source);
    if (heap != blocks_.end()) heap->second.erase(address);
  }
}

void HeapLayout::for_each_run(int64_t source, int64_t device,
                              const std::function<void(const Run&, BlockIterator, BlockIterator)>& visit) const {
  static const std::map<uint64_t, uint64_t> kNoBlocks;
  auto heap = blocks_.find(source);
  const std::map<uint64_t, uint64_t>& blocks = heap == blocks_.end() ? kNoBlocks : heap->second;
  // Walk the heap's segments in address order, joining adjacent mapped parts (of one expandable segment; separate
  // segments are never joined: an allocator splits blocks within a segment only), and the blocks inside each run:
  // the holes between blocks are the free blocks the allocator has.
  auto it = segments_.begin();
  while (it != segments_.end()) {
    if (it->second.source != source || it->second.device != device) {
      ++it;
      continue;
    }
    Run run;
    run.start = it->first;
    run.end = run.start;
    const bool mapped = it->second.mapped;
    while (it != segments_.end() && it->first == run.end && it->second.source == source &&
           it->second.device == device && (it->first == run.start || (mapped && it->second.mapped))) {
      ++run.segments;
      run.end = end_of(it->first, it->second.size);
      ++it;
    }
    uint64_t cursor = run.start;
    const BlockIterator first = blocks.lower_bound(run.start);
    BlockIterator block = first;
    for (; block != blocks.end() && block->first < run.end; ++block) {
      const uint64_t block_end = std::min(run.end, end_of(block->first, block->second));
      if (block->first > cursor) run.largest_free_bytes = std::max(run.largest_free_bytes, block->first - cursor);
      if (block_end > cursor) {
        run.held_bytes += block_end - std::max(cursor, block->first);
        cursor = block_end;
      }
    }
    if (run.end > cursor) run.largest_free_bytes = std::max(run.largest_free_bytes, run.end - cursor);
    visit(run, first, block);
  }
}

HeapSpace HeapLayout::space(int64_t source, int64_t device) const {
  HeapSpace space;
  for_each_run(source, device, [&space](const Run& run, BlockIterator, BlockIterator) {
    space.segments += run.segments;
    space.reserved_bytes += run.end - run.start;
    space.held_bytes += run.held_bytes;
    space.largest_free_bytes = std::max(space.largest_free_bytes, run.largest_free_bytes);
  });
  space.free_bytes = space.reserved_bytes - std::min(space.reserved_bytes, space.held_bytes);
  return space;
}

std::map<int64_t, std::pair<uint64_t, uint64_t>> HeapLayout::live_segments() const {
  std::map<int64_t, std::pair<uint64_t, uint64_t>> by_source;
  for (const auto& [address, segment] : segments_) {
    auto& [count, bytes] = by_source[segment.source];
    ++count;
    bytes += segment.size;
  }
  return by_source;
}

std::map<int64_t, std::pair<uint64_t, uint64_t>> HeapLayout::live_blocks() const {
  std::map<int64_t, std::pair<uint64_t, uint64_t>> by_source;
  for (const auto& [source, blocks] : blocks_) {
    if (blocks.empty()) continue;
    auto& [count, bytes] = by_source[source];
    for (const auto& [address, size] : blocks) {
      ++count;
      bytes += size;
    }
  }
  return by_source;
}

std::string heap_failure_label(uint64_t requested_bytes, const HeapSpace& space) {
  return space.free_bytes >= requested_bytes && requested_bytes > 0 ? "heap fragmentation" : "heap out of memory";
}

}  // namespace gmt::analysis
