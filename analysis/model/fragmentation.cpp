#include "analysis/model/fragmentation.h"

#include <algorithm>
#include <limits>

namespace gmt::analysis {

uint64_t GapTracker::gap(uint64_t address, uint64_t size, uint64_t next_address) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  uint64_t end = size > kMax - address ? kMax : address + size;
  // Round the end up to the granularity (saturating): alignment padding is not free space.
  const uint64_t remainder = end % kGapGranularity;
  if (remainder != 0) end = end > kMax - (kGapGranularity - remainder) ? kMax : end + (kGapGranularity - remainder);
  return next_address > end ? next_address - end : 0;  // overlaps (a damaged trace) leave no gap
}

void GapTracker::add_gap(uint64_t bytes) {
  if (bytes == 0) return;
  ++gaps_[bytes];
  gap_sum_ += bytes;
}

void GapTracker::remove_gap(uint64_t bytes) {
  if (bytes == 0) return;
  auto it = gaps_.find(bytes);
  if (it == gaps_.end()) return;  // cannot happen: every gap removed was added
  if (--it->second == 0) gaps_.erase(it);
  gap_sum_ -= bytes;
}

void GapTracker::insert(uint64_t address, uint64_t size) {
  if (live_.count(address)) erase(address);
  auto [it, inserted] = live_.emplace(address, size);
  auto next = std::next(it);
  if (it != live_.begin()) {
    auto prev = std::prev(it);
    if (next != live_.end()) remove_gap(gap(prev->first, prev->second, next->first));
    add_gap(gap(prev->first, prev->second, address));
  }
  if (next != live_.end()) add_gap(gap(address, size, next->first));
}

void GapTracker::erase(uint64_t address) {
  auto it = live_.find(address);
  if (it == live_.end()) return;
  auto next = std::next(it);
  if (next != live_.end()) remove_gap(gap(address, it->second, next->first));
  if (it != live_.begin()) {
    auto prev = std::prev(it);
    remove_gap(gap(prev->first, prev->second, address));
    if (next != live_.end()) add_gap(gap(prev->first, prev->second, next->first));
  }
  live_.erase(it);
}

FragmentationStats GapTracker::stats(int64_t time_ns) const {
  FragmentationStats stats;
  stats.time_ns = time_ns;
  stats.allocations = live_.size();
  if (live_.empty()) return stats;
  const auto& [first, first_size] = *live_.begin();
  const auto& [last, last_size] = *live_.rbegin();
  const uint64_t end =
      last_size > std::numeric_limits<uint64_t>::max() - last ? std::numeric_limits<uint64_t>::max() : last + last_size;
  stats.span_bytes = end - first;
  stats.free_bytes = gap_sum_;
  stats.largest_gap_bytes = gaps_.empty() ? 0 : gaps_.rbegin()->first;
  stats.ratio = stats.free_bytes == 0
                    ? 0.0
                    : 1.0 - static_cast<double>(stats.largest_gap_bytes) / static_cast<double>(stats.free_bytes);
  return stats;
}

std::string failure_label(const AllocFailure& failure) {
  // cudaErrorMemoryAllocation and CUDA_ERROR_OUT_OF_MEMORY are both 2.
  constexpr int64_t kOutOfMemory = 2;
  if (failure.error != kOutOfMemory) return "other error";
  if (!failure.device_free) return "unknown";
  return *failure.device_free > 0 && static_cast<uint64_t>(*failure.device_free) > failure.requested_bytes
             ? "fragmentation"
             : "out of memory";
}

}  // namespace gmt::analysis
