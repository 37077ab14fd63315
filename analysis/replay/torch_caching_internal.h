// The replay's block structures, shared by torch_caching.cpp and torch_expandable.cpp only (Block, BlockPool and
// ExpandableSegment of CUDACachingAllocator.cpp, reduced to what the policy reads).
#pragma once

#include <set>
#include <vector>

#include "analysis/replay/torch_caching.h"

namespace gmt::replay {

struct CachingAllocatorReplay::Block {
  uint64_t stream = 0;
  uint64_t size = 0;
  uint64_t ptr = 0;
  uint64_t requested = 0;
  uint64_t key = 0;  // the recorded address the trace's frees name
  Pool* pool = nullptr;
  Block* prev = nullptr;
  Block* next = nullptr;
  Expandable* expandable = nullptr;
  int64_t gc_count_base = 0;
  bool allocated = false;
  bool pending = false;  // freed, waiting for its streams (event_count > 0 in the source)
  bool mapped = true;

  bool is_split() const { return prev != nullptr || next != nullptr; }
  void splice(Block* before, Block* after) {
    if (before) before->next = this;
    prev = before;
    if (after) after->prev = this;
    next = after;
  }
};

struct CachingAllocatorReplay::Pool {
  explicit Pool(bool small) : is_small(small) {}
  std::set<Block*, BySize> blocks;
  std::set<Block*, ByAddress> unmapped;
  const bool is_small;
  int64_t get_free_blocks_call_count = 0;
};

// ExpandableSegment: one reserved range whose pages (2 MiB small pool, 20 MiB large pool) are mapped on demand.
struct CachingAllocatorReplay::Expandable {
  uint64_t ptr = 0;
  uint64_t segment_size = 0;  // the page
  uint64_t max_handles = 0;
  uint64_t stream = 0;
  std::vector<bool> handles;  // mapped pages

  uint64_t size() const { return max_handles * segment_size; }
  uint64_t segment_left(uint64_t p) const { return (p - ptr) / segment_size; }
  uint64_t segment_right(uint64_t p) const { return (p - ptr + segment_size - 1) / segment_size; }
};

}  // namespace gmt::replay
