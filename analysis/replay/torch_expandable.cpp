// Expandable segments (Note [Expandable Segments] in CUDACachingAllocator.cpp at 001074d25084): one reserved
// address range per stream and pool, 1 1/8 of the device's memory, mapped in pages of 2 MiB (small pool) or 20 MiB
// (large pool) as requests need them, unmapped only by a release of the cache (empty_cache or the OOM retry).
#include "analysis/replay/torch_caching_internal.h"

namespace gmt::replay {

// find_expandable_block: the lowest-address unmapped range of this stream (with a free block right before it) that
// has room for `size`; else a new segment.
CachingAllocatorReplay::Block* CachingAllocatorReplay::find_expandable_block(uint64_t stream, Pool& pool,
                                                                             uint64_t size) {
  auto allocatable = [](const Block* b) { return b && !b->allocated && !b->pending; };
  auto has_available_address_space = [&](const Block* b) {
    uint64_t bytes = 0;
    while (bytes < size && allocatable(b)) {
      bytes += b->size;
      b = b->next;
    }
    return bytes >= size;
  };
  Block key;
  key.stream = stream;
  for (auto it = pool.unmapped.lower_bound(&key); it != pool.unmapped.end() && (*it)->stream == stream; ++it) {
    Block* c = *it;
    if (allocatable(c->prev)) c = c->prev;
    if (has_available_address_space(c)) return c;
  }
  auto segment = std::make_unique<Expandable>();
  segment->segment_size = pool.is_small ? kSmallBuffer : kLargeBuffer;
  const uint64_t address_space = device_total_ + device_total_ / 8;
  segment->max_handles = (address_space + segment->segment_size - 1) / segment->segment_size;
  segment->stream = stream;
  segment->ptr = memory_.reserve(segment->size(), stream);
  Block* candidate = new_block(stream, segment->size(), &pool, segment->ptr);
  candidate->mapped = false;
  candidate->expandable = segment.get();
  pool.unmapped.insert(candidate);
  expandable_.push_back(std::move(segment));
  ++stats_.segments;
  return candidate;
}

// map_block: maps the pages under [to_map->ptr, +size) (ExpandableSegment::map rounds out to whole pages), keeps
// the rest of the range unmapped, and merges the mapped block with free neighbours.
bool CachingAllocatorReplay::map_block(Block* to_map, uint64_t size) {
  Expandable& segment = *to_map->expandable;
  const uint64_t begin = segment.segment_left(to_map->ptr);
  const uint64_t end = segment.segment_right(to_map->ptr + size);
  if (begin == end) return false;
  const uint64_t mapped_size = (end - begin) * segment.segment_size;
  if (!memory_.map(segment.ptr + begin * segment.segment_size, mapped_size, to_map->stream)) return false;
  if (segment.handles.size() < end) segment.handles.resize(end, false);
  for (uint64_t i = begin; i < end; ++i) segment.handles[i] = true;

  Pool& pool = *to_map->pool;
  pool.unmapped.erase(to_map);
  to_map->mapped = true;
  if (mapped_size < to_map->size) {
    Block* remaining = new_block(to_map->stream, to_map->size - mapped_size, &pool, to_map->ptr + mapped_size);
    remaining->mapped = false;
    remaining->expandable = to_map->expandable;
    remaining->splice(to_map, to_map->next);
    pool.unmapped.insert(remaining);
    to_map->size = mapped_size;
  }
  try_merge_blocks(to_map, to_map->prev, pool);
  try_merge_blocks(to_map, to_map->next, pool);
  insert_into_blocks(pool, to_map);
  stats_.reserved += mapped_size;
  return true;
}

// try_allocate_expandable_block: maps only what the rounded request needs (not alloc_size), page by page from the
// candidate on; a later page that fails leaves the earlier ones mapped, as in the source.
CachingAllocatorReplay::Block* CachingAllocatorReplay::try_allocate_expandable_block(uint64_t stream, Pool& pool,
                                                                                     uint64_t size) {
  Block* candidate = find_expandable_block(stream, pool, size);
  if (!candidate->mapped && !map_block(candidate, std::min(candidate->size, size))) return nullptr;
  while (candidate->size < size) {
    const uint64_t remaining = size - candidate->size;
    Block* new_candidate = candidate->next;
    if (!map_block(new_candidate, std::min(remaining, new_candidate->size))) return nullptr;
    candidate = new_candidate;
  }
  pool.blocks.erase(candidate);
  return candidate;
}

// unmap_block: unmaps the whole pages inside a free block; the partial pages at its ends stay mapped free blocks.
void CachingAllocatorReplay::unmap_block(Block* block) {
  Expandable& segment = *block->expandable;
  const uint64_t begin = segment.segment_right(block->ptr);
  const uint64_t end = segment.segment_left(block->ptr + block->size);
  if (begin >= end) return;
  const uint64_t unmapped_ptr = segment.ptr + begin * segment.segment_size;
  const uint64_t unmapped_size = (end - begin) * segment.segment_size;
  memory_.unmap(unmapped_ptr, unmapped_size, block->stream);
  for (uint64_t i = begin; i < end; ++i) segment.handles[i] = false;

  Pool& pool = *block->pool;
  pool.blocks.erase(block);
  const uint64_t before_size = unmapped_ptr - block->ptr;
  if (before_size > 0) {
    Block* before_free = new_block(block->stream, before_size, &pool, block->ptr);
    before_free->expandable = block->expandable;
    before_free->splice(block->prev, block);
    insert_into_blocks(pool, before_free);
  }
  const uint64_t after_size = block->size - (before_size + unmapped_size);
  if (after_size > 0) {
    Block* after_free = new_block(block->stream, after_size, &pool, unmapped_ptr + unmapped_size);
    after_free->expandable = block->expandable;
    after_free->splice(block, block->next);
    insert_into_blocks(pool, after_free);
  }
  block->ptr = unmapped_ptr;
  block->size = unmapped_size;
  block->mapped = false;
  try_merge_blocks(block, block->prev, pool);
  try_merge_blocks(block, block->next, pool);
  pool.unmapped.insert(block);
  stats_.reserved -= unmapped_size;
}

// release_expandable_segment: a segment whose every page is unmapped gives its address range back.
void CachingAllocatorReplay::release_expandable_segment(Block* block) {
  Expandable* segment = block->expandable;
  memory_.release_reservation(segment->ptr, segment->size());
  block->pool->unmapped.erase(block);
  delete_block(block);
  for (auto it = expandable_.begin(); it != expandable_.end(); ++it) {
    if (it->get() == segment) {
      expandable_.erase(it);
      break;
    }
  }
  --stats_.segments;
}

}  // namespace gmt::replay
