#include "sim_heap.h"

#include <algorithm>
#include <iterator>
#include <limits>

namespace gmt::sim {

Heap::Heap(std::uintptr_t base, std::size_t capacity) : base_(base), capacity_(capacity - capacity % kGranularity) {
  clear();
}

std::optional<std::size_t> Heap::round_up(std::size_t bytes) {
  if (bytes == 0) return kGranularity;
  if (bytes > std::numeric_limits<std::size_t>::max() - (kGranularity - 1)) return std::nullopt;
  return (bytes + kGranularity - 1) / kGranularity * kGranularity;
}

std::optional<std::uintptr_t> Heap::allocate(std::size_t bytes, std::uint32_t tag) {
  const std::optional<std::size_t> size = round_up(bytes);
  if (!size || *size > free_bytes()) return std::nullopt;

  // Linear first fit. Free lists stay short in the workloads this simulates, and first fit is what
  // makes fragmentation deterministic and easy to reason about in tests.
  for (auto it = free_blocks_.begin(); it != free_blocks_.end(); ++it) {
    if (it->second < *size) continue;
    const std::uintptr_t address = it->first;
    const std::size_t remainder = it->second - *size;
    free_blocks_.erase(it);
    if (remainder != 0) free_blocks_.emplace(address + *size, remainder);
    live_.emplace(address, Allocation{address, bytes, *size, tag});
    used_ += *size;
    return address;
  }
  return std::nullopt;
}

std::optional<Heap::Allocation> Heap::release(std::uintptr_t address) {
  const auto live = live_.find(address);
  if (live == live_.end()) return std::nullopt;
  const Allocation freed = live->second;
  live_.erase(live);
  used_ -= freed.size;

  std::uintptr_t start = freed.address;
  std::size_t size = freed.size;
  // Merge with the free block that ends exactly where this one starts...
  auto next = free_blocks_.lower_bound(start);
  if (next != free_blocks_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      free_blocks_.erase(prev);
    }
  }
  // ...and with the one that starts exactly where it ends, so free space never stays split.
  if (next != free_blocks_.end() && next->first == freed.address + freed.size) {
    size += next->second;
    free_blocks_.erase(next);
  }
  free_blocks_.emplace(start, size);
  return freed;
}

std::optional<Heap::Allocation> Heap::find_containing(std::uintptr_t address) const {
  auto it = live_.upper_bound(address);
  if (it == live_.begin()) return std::nullopt;
  --it;
  if (address - it->first >= it->second.size) return std::nullopt;
  return it->second;
}

void Heap::clear() {
  live_.clear();
  free_blocks_.clear();
  used_ = 0;
  if (capacity_ != 0) free_blocks_.emplace(base_, capacity_);
}

std::size_t Heap::largest_free_block() const {
  std::size_t largest = 0;
  for (const auto& [start, size] : free_blocks_) largest = std::max(largest, size);
  return largest;
}

}  // namespace gmt::sim
