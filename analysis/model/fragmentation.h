// Address-space layout, internal to analysis/ (docs/analysis.md defines every number): free gaps between the live
// device allocations of one device, and the label of a failed allocation. The gaps are virtual addresses: the
// driver maps physical pages anywhere, so they do not say whether the next cudaMalloc fits (JSON only).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/model/report.h"
#include "analysis/read/trace_file.h"

namespace gmt::analysis {

// cudaMalloc hands out addresses aligned to (at least) this; allocation ends are rounded up to it so that
// alignment padding between two allocations is not counted as a free gap.
inline constexpr uint64_t kGapGranularity = 512;

// The live device allocations of one device, ordered by address, with the free gaps between neighbours kept
// up to date on every insert and erase (O(log n) each), so the stats at any moment cost O(1).
class GapTracker {
 public:
  void insert(uint64_t address, uint64_t size);
  void erase(uint64_t address);  // an address that is not live is ignored
  bool empty() const { return live_.empty(); }
  FragmentationStats stats(int64_t time_ns) const;

 private:
  // The free bytes between an allocation and the next one.
  static uint64_t gap(uint64_t address, uint64_t size, uint64_t next_address);
  void add_gap(uint64_t bytes);
  void remove_gap(uint64_t bytes);

  std::map<uint64_t, uint64_t> live_;  // address -> size
  // Non-zero gap sizes with how many gaps have each: equal gaps (blocks of one size) share a node.
  std::map<uint64_t, uint64_t> gaps_;
  uint64_t gap_sum_ = 0;
};

// The OOM label of a failure: "fragmentation", "out of memory", "unknown" or "other error".
std::string failure_label(const AllocFailure& failure);

}  // namespace gmt::analysis
