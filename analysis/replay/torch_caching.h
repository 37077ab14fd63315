// A replay of PyTorch's native CUDA caching allocator (DeviceCachingAllocator in c10/cuda/CUDACachingAllocator.cpp)
// for one device: the same block structures (free blocks in a std::set ordered by stream, size, address, per pool),
// the same best fit, split, merge, garbage collection and out-of-memory chain, and expandable segments, each function
// named after the one it follows. It asks "CUDA" for memory through DeviceMemory, so the same policy runs against the
// recorded segments (the self-check: self_check.h) or against a capacity model (another setting: whatif.h).
//
// What it does not model (docs/analysis.md "What-if replay"): CUDA-graph private pools (replay_run.cpp stops at the
// first block or segment of one), the free-memory callbacks registry (CUDA IPC), and cross-stream uses other than as
// recorded (a block's return to the pool is taken from the trace's free_completed, except that a release of the cache
// completes every pending one at once, as synchronize_and_free_events does).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "analysis/replay/torch_config.h"

namespace gmt::replay {

// What the replay asks of CUDA. Every call that changes device memory is one segment action of the recording
// (SEGMENT_ALLOC/FREE/MAP/UNMAP), in the order PyTorch makes it.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // cudaMalloc: the address, or nullopt for cudaErrorMemoryAllocation.
  virtual std::optional<uint64_t> malloc(uint64_t size, uint64_t stream) = 0;
  virtual void free(uint64_t address, uint64_t size, uint64_t stream) = 0;
  // cuMemAddressReserve for a new expandable segment (no memory yet).
  virtual uint64_t reserve(uint64_t size, uint64_t stream) = 0;
  virtual void release_reservation(uint64_t address, uint64_t size) = 0;
  // ExpandableSegment::map of whole pages: all or nothing (the source releases the pages it created on failure).
  virtual bool map(uint64_t address, uint64_t size, uint64_t stream) = 0;
  virtual void unmap(uint64_t address, uint64_t size, uint64_t stream) = 0;
};

// The allocator's statistics that the what-if reports (memory_stats names).
struct ReplayStats {
  uint64_t reserved = 0;        // reserved_bytes.all.current (= total_allocated_memory)
  uint64_t allocated = 0;       // allocated_bytes.all.current: rounded block sizes handed out
  uint64_t requested = 0;       // requested_bytes.all.current
  uint64_t inactive_split = 0;  // inactive_split_bytes.all.current (0 inside expandable segments, by design)
  uint64_t segments = 0;        // cudaMalloc'd segments plus expandable segments
  uint64_t alloc_retries = 0;   // num_alloc_retries
  uint64_t ooms = 0;            // num_ooms
  uint64_t gc_releases = 0;     // segments the garbage collector gave back
};

class CachingAllocatorReplay {
 public:
  // `device_total`: cudaDeviceProp::totalGlobalMem, which sizes an expandable segment's reservation and the memory
  // fraction's allowed maximum.
  CachingAllocatorReplay(TorchAllocatorConfig config, DeviceMemory& memory, uint64_t device_total);
  ~CachingAllocatorReplay();
  CachingAllocatorReplay(const CachingAllocatorReplay&) = delete;
  CachingAllocatorReplay& operator=(const CachingAllocatorReplay&) = delete;

  struct Allocation {
    bool ok = false;       // false: OutOfMemoryError
    uint64_t address = 0;  // the block's
    uint64_t size = 0;     // the block's (rounded, or the whole block when it was not split)
    uint64_t rounded = 0;  // round_size(request): the OOM event's size
  };
  // DeviceCachingAllocator::malloc. `key` names the block for its frees (the recorded address).
  Allocation malloc(uint64_t key, uint64_t orig_size, uint64_t stream);
  // DeviceCachingAllocator::free up to insert_events / free_block: the block is no longer allocated; it returns to the
  // pool at free_completed. False for a key no live block has.
  bool free_requested(uint64_t key);
  // free_block: the block goes back to its pool and merges with free neighbours. Also does free_requested's part
  // for a trace that recorded only the completion. False for an unknown key.
  bool free_completed(uint64_t key);
  void empty_cache();  // emptyCache = release_cached_blocks
  void set_config(const TorchAllocatorConfig& config) { config_ = config; }
  void set_memory_fraction(double fraction);  // setMemoryFraction (of device_total)

  // A block the program still holds (allocated, or freed and waiting for its streams), as the allocator has it: the
  // size PyTorch's snapshot shows (rounded, and with the tail of a free block it handed out whole) and the request.
  struct HeldBlock {
    uint64_t key = 0;  // the recorded address
    uint64_t address = 0;
    uint64_t size = 0;
    uint64_t requested = 0;
    bool pending = false;  // freed (free_requested), back in the pool at its free_completed
  };
  std::vector<HeldBlock> held_blocks() const;

  // Whether get_free_block would find a cached block for this request now (no state changes).
  bool would_reuse(uint64_t orig_size, uint64_t stream) const;
  // Whether the block named `key` was freed and waits for other streams (free_requested, not yet completed): only
  // such a block can come back inside a release of the cache (synchronize_and_free_events).
  bool is_pending(uint64_t key) const;
  const ReplayStats& stats() const { return stats_; }
  const TorchAllocatorConfig& config() const { return config_; }
  size_t live_blocks() const { return by_key_.size(); }

 private:
  struct Block;
  struct Pool;
  struct Expandable;
  struct BySize {
    bool operator()(const Block* a, const Block* b) const;
  };
  struct ByAddress {
    bool operator()(const Block* a, const Block* b) const;
  };
  struct Params {
    uint64_t size = 0;  // rounded
    uint64_t stream = 0;
    Pool* pool = nullptr;
    uint64_t alloc_size = 0;
    Block* block = nullptr;
  };

  Block* new_block(uint64_t stream, uint64_t size, Pool* pool, uint64_t ptr);
  void delete_block(Block* block);
  void insert_into_blocks(Pool& pool, Block* block);
  bool get_free_block(Params& p);
  std::set<Block*, BySize>::const_iterator find_candidate(const Params& p) const;
  void garbage_collect_cached_blocks();
  bool alloc_block(Params& p, bool is_retry);
  bool release_available_cached_blocks(const Params& p);
  bool release_cached_blocks();
  void release_blocks(Pool& pool);
  void release_block(Block* block);
  void synchronize_and_free_events();
  bool should_split(const Block* block, uint64_t size) const;
  Block* alloc_found_block(Params& p, uint64_t orig_size, bool split_remainder);
  void free_block(Block* block);
  uint64_t try_merge_blocks(Block* dst, Block* src, Pool& pool);
  // Expandable segments (torch_expandable.cpp).
  Block* find_expandable_block(uint64_t stream, Pool& pool, uint64_t size);
  bool map_block(Block* to_map, uint64_t size);
  Block* try_allocate_expandable_block(uint64_t stream, Pool& pool, uint64_t size);
  void unmap_block(Block* block);
  void release_expandable_segment(Block* block);

  TorchAllocatorConfig config_;
  DeviceMemory& memory_;
  uint64_t device_total_;
  std::unique_ptr<Pool> large_;
  std::unique_ptr<Pool> small_;
  std::unordered_map<uint64_t, Block*> by_key_;   // live (allocated or pending) blocks by recorded address
  std::vector<Block*> pending_;                   // freed, not yet completed (cross-stream uses)
  std::unordered_set<uint64_t> completed_early_;  // completed by a release of the cache before the trace says
  std::vector<std::unique_ptr<Expandable>> expandable_;
  std::vector<Block*> spare_blocks_;  // Block objects to reuse: no heap allocation per event
  ReplayStats stats_;
  bool set_fraction_ = false;
  uint64_t allowed_memory_maximum_ = 0;
};

}  // namespace gmt::replay
