// DeviceCachingAllocator's policy (c10/cuda/CUDACachingAllocator.cpp at 001074d25084, with b944315b93d3's
// max_non_split_rounding_size and its release_available_cached_blocks that leaves expandable blocks alone). Each
// function carries the source's name; the comments say only where and why the replay differs.
#include <algorithm>
#include <cmath>

#include "analysis/replay/torch_caching_internal.h"

namespace gmt::replay {

bool CachingAllocatorReplay::BySize::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  return a->ptr < b->ptr;
}

bool CachingAllocatorReplay::ByAddress::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  return a->ptr < b->ptr;
}

CachingAllocatorReplay::CachingAllocatorReplay(TorchAllocatorConfig config, DeviceMemory& memory, uint64_t device_total)
    : config_(std::move(config)),
      memory_(memory),
      device_total_(device_total),
      large_(std::make_unique<Pool>(false)),
      small_(std::make_unique<Pool>(true)) {
  if (config_.memory_fraction) set_memory_fraction(*config_.memory_fraction);
}

CachingAllocatorReplay::~CachingAllocatorReplay() {
  std::vector<Block*> all(spare_blocks_);
  for (Pool* pool : {large_.get(), small_.get()}) {
    all.insert(all.end(), pool->blocks.begin(), pool->blocks.end());
    all.insert(all.end(), pool->unmapped.begin(), pool->unmapped.end());
  }
  for (auto& [key, block] : by_key_) all.push_back(block);
  for (Block* block : all) delete block;
}

CachingAllocatorReplay::Block* CachingAllocatorReplay::new_block(uint64_t stream, uint64_t size, Pool* pool,
                                                                 uint64_t ptr) {
  Block* block;
  if (spare_blocks_.empty()) {
    block = new Block;
  } else {
    block = spare_blocks_.back();
    spare_blocks_.pop_back();
    *block = Block{};
  }
  block->stream = stream;
  block->size = size;
  block->pool = pool;
  block->ptr = ptr;
  return block;
}

void CachingAllocatorReplay::delete_block(Block* block) { spare_blocks_.push_back(block); }

// BlockPool::insert_into_blocks: the garbage collector's age starts now.
void CachingAllocatorReplay::insert_into_blocks(Pool& pool, Block* block) {
  block->gc_count_base = pool.get_free_blocks_call_count;
  pool.blocks.insert(block);
}

CachingAllocatorReplay::Allocation CachingAllocatorReplay::malloc(uint64_t key, uint64_t orig_size, uint64_t stream) {
  Params params;
  params.size = round_size(config_, orig_size);
  params.stream = stream;
  params.pool = is_small_request(params.size) ? small_.get() : large_.get();
  params.alloc_size = allocation_size(params.size);
  Allocation result;
  result.rounded = params.size;

  // The free-memory callbacks (trigger_free_memory_callbacks: CUDA IPC) free nothing the trace shows: not modelled.
  bool found = get_free_block(params);
  if (!found) {
    if (set_fraction_ && config_.garbage_collection_threshold > 0.0) garbage_collect_cached_blocks();
    found = alloc_block(params, false) || (release_available_cached_blocks(params) && alloc_block(params, false)) ||
            (release_cached_blocks() && alloc_block(params, true));
  }
  if (!found) {
    ++stats_.ooms;
    return result;
  }
  const bool split = should_split(params.block, params.size);
  Block* block = alloc_found_block(params, orig_size, split);
  block->key = key;
  by_key_[key] = block;
  result.ok = true;
  result.address = block->ptr;
  result.size = block->size;
  return result;
}

std::set<CachingAllocatorReplay::Block*, CachingAllocatorReplay::BySize>::const_iterator
CachingAllocatorReplay::find_candidate(const Params& p) const {
  const Pool& pool = *p.pool;
  Block search_key;
  search_key.stream = p.stream;
  search_key.size = p.size;
  auto it = pool.blocks.lower_bound(&search_key);
  if (it == pool.blocks.end() || (*it)->stream != p.stream) return pool.blocks.end();
  if ((*it)->expandable) {
    if (config_.expandable_segments) {
      // Best fit counts the unmapped space after a free block as part of it (expandable_size).
      auto expandable_size = [](const Block* b) { return b->size + (b->next && !b->next->mapped ? b->next->size : 0); };
      auto next = std::next(it);
      while ((*it)->expandable && next != pool.blocks.end() && (*next)->stream == p.stream &&
             expandable_size(*next) < expandable_size(*it)) {
        it = next++;
      }
    } else {
      // Expandable segments turned off since: only non-expandable blocks may be used.
      do {
        ++it;
      } while (it != pool.blocks.end() && (*it)->expandable && (*it)->stream == p.stream);
      if (it == pool.blocks.end() || (*it)->stream != p.stream) return pool.blocks.end();
    }
  }
  // "Do not return an oversized block for a large request"
  if (p.size < config_.max_split_size && (*it)->size >= config_.max_split_size) return pool.blocks.end();
  // "Allow oversized block size to be rounded up but within a limit"
  if (p.size >= config_.max_split_size && (*it)->size >= p.size + config_.max_non_split_rounding_size) {
    return pool.blocks.end();
  }
  return it;
}

bool CachingAllocatorReplay::get_free_block(Params& p) {
  if (set_fraction_ && config_.garbage_collection_threshold > 0.0) ++p.pool->get_free_blocks_call_count;
  auto it = find_candidate(p);
  if (it == p.pool->blocks.end()) return false;
  p.block = *it;
  p.pool->blocks.erase(it);
  return true;
}

bool CachingAllocatorReplay::would_reuse(uint64_t orig_size, uint64_t stream) const {
  Params params;
  params.size = round_size(config_, orig_size);
  params.stream = stream;
  params.pool = is_small_request(params.size) ? small_.get() : large_.get();
  return find_candidate(params) != params.pool->blocks.end();
}

bool CachingAllocatorReplay::is_pending(uint64_t key) const {
  auto it = by_key_.find(key);
  return it != by_key_.end() && it->second->pending;
}

// garbage_collect_cached_blocks: frees whole (unsplit) large free blocks at least as old as the average, until the
// reserved memory is back under threshold * allowed maximum. Only runs with a memory fraction set.
void CachingAllocatorReplay::garbage_collect_cached_blocks() {
  const auto gc_threshold =
      static_cast<uint64_t>(config_.garbage_collection_threshold * static_cast<double>(allowed_memory_maximum_));
  if (stats_.reserved <= gc_threshold) return;
  const uint64_t target_size = stats_.reserved - gc_threshold;
  uint64_t gc_reclaimed = 0;
  Pool& pool = *large_;
  auto gc_count = [&pool](const Block* b) {
    return static_cast<uint64_t>(static_cast<int>(pool.get_free_blocks_call_count - b->gc_count_base));
  };
  uint64_t total_age = 0;
  int freeable_block_count = 0;
  for (const Block* b : pool.blocks) {
    if (!b->is_split() && !b->expandable) {
      total_age += gc_count(b);
      ++freeable_block_count;
    }
  }
  if (freeable_block_count == 0) return;
  bool block_freed = true;
  while (gc_reclaimed < target_size && block_freed && freeable_block_count > 0) {
    const double age_threshold = static_cast<double>(total_age) / freeable_block_count;
    block_freed = false;
    for (auto it = pool.blocks.begin(); it != pool.blocks.end();) {
      Block* block = *it++;
      if (!block->is_split() && !block->expandable && static_cast<double>(gc_count(block)) >= age_threshold) {
        block_freed = true;
        gc_reclaimed += block->size;
        total_age -= gc_count(block);
        --freeable_block_count;
        ++stats_.gc_releases;
        release_block(block);
      }
    }
  }
}

bool CachingAllocatorReplay::alloc_block(Params& p, bool is_retry) {
  if (is_retry) ++stats_.alloc_retries;
  // The fraction is checked against alloc_size before any CUDA call, also for expandable segments.
  if (set_fraction_ && stats_.reserved + p.alloc_size > allowed_memory_maximum_) return false;
  if (config_.expandable_segments) {
    p.block = try_allocate_expandable_block(p.stream, *p.pool, p.size);
    return p.block != nullptr;
  }
  std::optional<uint64_t> ptr = memory_.malloc(p.alloc_size, p.stream);
  if (!ptr) return false;
  stats_.reserved += p.alloc_size;
  ++stats_.segments;
  p.block = new_block(p.stream, p.alloc_size, p.pool, *ptr);
  return true;
}

// release_available_cached_blocks: with max_split_size set, frees one oversize free block of this stream large
// enough for the request, else the largest oversize ones until enough is freed. Expandable blocks are left alone.
bool CachingAllocatorReplay::release_available_cached_blocks(const Params& p) {
  if (config_.max_split_size == UINT64_MAX) return false;
  Pool& pool = *p.pool;
  Block key;
  key.stream = p.stream;
  key.size = std::max(p.size, config_.max_split_size);
  auto it = pool.blocks.lower_bound(&key);
  if (it == pool.blocks.end() || (*it)->stream != p.stream || (*it)->expandable) {
    if (it == pool.blocks.begin()) return false;
    uint64_t total_released = 0;
    --it;  // the largest block of this stream
    while (total_released < key.size && (*it)->size >= config_.max_split_size && (*it)->stream == p.stream) {
      auto cur = it;
      const bool at_begin = it == pool.blocks.begin();
      if (!at_begin) --it;
      if (!(*cur)->expandable) {
        total_released += (*cur)->size;
        release_block(*cur);
      }
      if (at_begin) break;
    }
    return total_released >= key.size;
  }
  release_block(*it);
  return true;
}

// release_cached_blocks (also emptyCache): every pending free completes, then every whole free segment goes back.
bool CachingAllocatorReplay::release_cached_blocks() {
  synchronize_and_free_events();
  release_blocks(*large_);
  release_blocks(*small_);
  return true;
}

void CachingAllocatorReplay::release_blocks(Pool& pool) {
  std::vector<Block*> to_unmap;
  for (auto it = pool.blocks.begin(); it != pool.blocks.end();) {
    Block* block = *it++;
    if (block->expandable) {
      to_unmap.push_back(block);
    } else if (!block->prev && !block->next) {
      release_block(block);
    }
  }
  for (Block* block : to_unmap) {
    unmap_block(block);
    if (!block->prev && !block->next) release_expandable_segment(block);
  }
}

void CachingAllocatorReplay::release_block(Block* block) {
  memory_.free(block->ptr, block->size, block->stream);
  stats_.reserved -= block->size;
  --stats_.segments;
  block->pool->blocks.erase(block);
  delete_block(block);
}

void CachingAllocatorReplay::synchronize_and_free_events() {
  std::vector<Block*> pending;
  pending.swap(pending_);
  for (Block* block : pending) {
    if (!block->pending) continue;  // completed by the trace meanwhile
    by_key_.erase(block->key);
    completed_early_.insert(block->key);  // its recorded free_completed comes later: nothing to do then
    block->pending = false;
    free_block(block);
  }
}

bool CachingAllocatorReplay::should_split(const Block* block, uint64_t size) const {
  const uint64_t remaining = block->size - size;
  if (block->pool->is_small || config_.expandable_segments) return remaining >= kMinBlockSize;
  return size < config_.max_split_size && remaining > kSmallSize;
}

CachingAllocatorReplay::Block* CachingAllocatorReplay::alloc_found_block(Params& p, uint64_t orig_size,
                                                                         bool split_remainder) {
  Block* block = p.block;
  const bool already_split = block->is_split();
  if (split_remainder) {
    Block* remaining = block;
    block = new_block(p.stream, p.size, p.pool, remaining->ptr);
    block->expandable = remaining->expandable;
    block->prev = remaining->prev;
    if (block->prev) block->prev->next = block;
    block->next = remaining;
    remaining->prev = block;
    remaining->ptr += p.size;
    remaining->size -= p.size;
    insert_into_blocks(*p.pool, remaining);
    if (already_split && !block->expandable) {
      stats_.inactive_split -= block->size;  // an inactive split block shrinks by the size handed out
    } else if (!block->expandable) {
      stats_.inactive_split += remaining->size;  // a new inactive split block
    }
  } else if (already_split && !block->expandable) {
    stats_.inactive_split -= block->size;
  }
  block->allocated = true;
  block->pending = false;
  block->requested = orig_size;
  stats_.allocated += block->size;
  stats_.requested += orig_size;
  return block;
}

bool CachingAllocatorReplay::free_requested(uint64_t key) {
  auto it = by_key_.find(key);
  if (it == by_key_.end() || !it->second->allocated) return false;
  Block* block = it->second;
  block->allocated = false;
  block->pending = true;
  stats_.allocated -= block->size;
  stats_.requested -= block->requested;
  pending_.push_back(block);
  return true;
}

bool CachingAllocatorReplay::free_completed(uint64_t key) {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return completed_early_.erase(key) > 0;
  Block* block = it->second;
  if (block->allocated) {
    block->allocated = false;
    stats_.allocated -= block->size;
    stats_.requested -= block->requested;
  }
  block->pending = false;  // pending_ keeps the pointer until the next release looks: skipped there
  by_key_.erase(it);
  free_block(block);
  if (pending_.size() > 64 && pending_.size() > 2 * by_key_.size()) {
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(), [](const Block* b) { return !b->pending; }),
                   pending_.end());
  }
  return true;
}

void CachingAllocatorReplay::free_block(Block* block) {
  Pool& pool = *block->pool;
  int64_t net_inactive_split_size = 0;
  for (Block* candidate : {block->prev, block->next}) {
    const uint64_t subsumed = try_merge_blocks(block, candidate, pool);
    if (subsumed > 0) net_inactive_split_size -= static_cast<int64_t>(subsumed);
  }
  insert_into_blocks(pool, block);
  if (block->is_split()) net_inactive_split_size += static_cast<int64_t>(block->size);
  // Modular arithmetic: a negative change wraps back, as the source's decrease_stat does.
  if (!block->expandable) stats_.inactive_split += static_cast<uint64_t>(net_inactive_split_size);
}

uint64_t CachingAllocatorReplay::try_merge_blocks(Block* dst, Block* src, Pool& pool) {
  if (!src || src->allocated || src->pending || dst->mapped != src->mapped) return 0;
  if (dst->prev == src) {  // [src dst]
    dst->ptr = src->ptr;
    dst->prev = src->prev;
    if (dst->prev) dst->prev->next = dst;
  } else {  // [dst src]
    dst->next = src->next;
    if (dst->next) dst->next->prev = dst;
  }
  const uint64_t subsumed = src->size;
  dst->size += subsumed;
  if (src->mapped) {
    pool.blocks.erase(src);
  } else {
    pool.unmapped.erase(src);
  }
  delete_block(src);
  return subsumed;
}

void CachingAllocatorReplay::empty_cache() { release_cached_blocks(); }

std::vector<CachingAllocatorReplay::HeldBlock> CachingAllocatorReplay::held_blocks() const {
  std::vector<HeldBlock> held;
  held.reserve(by_key_.size());
  for (const auto& [key, block] : by_key_) {
    held.push_back({key, block->ptr, block->size, block->requested, !block->allocated});
  }
  return held;
}

// setMemoryFraction at b944315b93d3 (allowed_memory_maximum is an optional there): a fraction below 1 limits
// PyTorch's reserved bytes to fraction * totalGlobalMem, checked in alloc_block against alloc_size before any CUDA
// call; a fraction of 1 or more lifts the limit (and with it the garbage collection). 001074d25084 set the limit for
// every fraction, 1 included, from cudaMemGetInfo's total: the same bytes on the devices seen.
void CachingAllocatorReplay::set_memory_fraction(double fraction) {
  set_fraction_ = fraction < 1.0;
  allowed_memory_maximum_ = set_fraction_ ? static_cast<uint64_t>(fraction * static_cast<double>(device_total_)) : 0;
}

}  // namespace gmt::replay
