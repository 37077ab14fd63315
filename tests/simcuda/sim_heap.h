// A first-fit heap over one contiguous address range: the allocator behind every simulated device.
//
// The heap only does bookkeeping on addresses; it never touches the memory. That keeps it usable on
// a made-up base address in unit tests, while the runtime points it at a real reserved mapping so
// the addresses it hands out can be read and written.
//
// Not thread-safe: the owning device serialises access with its own mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>

namespace gmt::sim {

class Heap {
 public:
  // Real CUDA hands out device memory in 512-byte aligned chunks (cudaMalloc guarantees at least
  // 256-byte alignment; small allocations are 512-byte spaced in practice). Using the same grain
  // keeps free-memory arithmetic and fragmentation patterns close to a real GPU.
  static constexpr std::size_t kGranularity = 512;

  struct Allocation {
    std::uintptr_t address = 0;
    std::size_t requested = 0;  // what the caller asked for
    std::size_t size = 0;       // what the heap reserved: requested rounded up to kGranularity
    std::uint32_t tag = 0;      // caller-defined kind (device, managed, ...); the heap ignores it
  };

  Heap() = default;
  // `base` must be kGranularity-aligned; `capacity` is rounded down to a multiple of kGranularity.
  Heap(std::uintptr_t base, std::size_t capacity);

  // Rounds `bytes` up to the allocation grain; zero becomes one grain so every allocation gets a
  // distinct address. Returns nullopt when the rounded size does not fit in size_t.
  static std::optional<std::size_t> round_up(std::size_t bytes);

  // First fit: the lowest-addressed free block that is large enough. Returns nullopt when no single
  // free block fits, even if the free total would (that is what fragmentation looks like).
  std::optional<std::uintptr_t> allocate(std::size_t bytes, std::uint32_t tag = 0);

  // Frees the allocation that starts exactly at `address` and merges it with free neighbours.
  // Returns the freed allocation, or nullopt if `address` is not the start of a live allocation.
  std::optional<Allocation> release(std::uintptr_t address);

  // The live allocation containing `address` (start inclusive, end exclusive of its reserved size).
  std::optional<Allocation> find_containing(std::uintptr_t address) const;

  // Forgets every allocation: the whole range becomes one free block again.
  void clear();

  bool in_range(std::uintptr_t address) const { return address >= base_ && address - base_ < capacity_; }
  std::uintptr_t base() const { return base_; }
  std::size_t capacity() const { return capacity_; }
  std::size_t used() const { return used_; }  // sum of reserved (rounded) sizes
  std::size_t free_bytes() const { return capacity_ - used_; }
  std::size_t largest_free_block() const;
  std::size_t free_block_count() const { return free_blocks_.size(); }
  std::size_t allocation_count() const { return live_.size(); }

 private:
  std::uintptr_t base_ = 0;
  std::size_t capacity_ = 0;
  std::size_t used_ = 0;
  // Both maps are keyed by address: ordered iteration gives first fit for free, and the neighbours
  // of a freed block (for coalescing) or of a looked-up pointer are one map step away.
  std::map<std::uintptr_t, std::size_t> free_blocks_;  // start -> size; never two adjacent blocks
  std::map<std::uintptr_t, Allocation> live_;
};

}  // namespace gmt::sim
