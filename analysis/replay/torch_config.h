// PyTorch's caching-allocator settings (PYTORCH_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF) and the size rules that depend
// on them, as the what-if replay (torch_caching.h) applies them. Every constant and rule names the function of
// PyTorch's source it was checked against: c10/cuda/CUDACachingAllocator.cpp at 001074d25084 (round_size,
// get_allocation_size, should_split, get_free_block) and c10/core/AllocatorConfig.cpp at 065861fba759 / b42fb11650d1
// (parseArgs and its parse* helpers, roundup_power2_divisions(size)). ../../docs/analysis.md "What-if replay" says
// which torch versions this policy was checked for.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gmt::replay {

// CUDACachingAllocator.cpp, top of namespace Native.
inline constexpr uint64_t kMinBlockSize = 512;        // "all sizes are rounded to at least 512 bytes"
inline constexpr uint64_t kSmallSize = 1048576;       // "largest 'small' allocation is 1 MiB"
inline constexpr uint64_t kSmallBuffer = 2097152;     // "'small' allocations are packed in 2 MiB blocks"
inline constexpr uint64_t kLargeBuffer = 20971520;    // "'large' allocations may be packed in 20 MiB blocks"
inline constexpr uint64_t kMinLargeAlloc = 10485760;  // "allocations between 1 and 10 MiB may use kLargeBuffer"
inline constexpr uint64_t kRoundLarge = 2097152;      // "round up large allocations to 2 MiB"
// AllocatorConfig.cpp: 16 power-of-two intervals from 1 MiB (kRoundUpPowerOfTwoStart) to 64 GiB.
inline constexpr size_t kRoundUpPowerOfTwoIntervals = 16;
inline constexpr uint64_t kMB = 1048576;

struct TorchAllocatorConfig {
  uint64_t max_split_size = UINT64_MAX;                 // max_split_size_mb; default: no limit
  uint64_t max_non_split_rounding_size = kLargeBuffer;  // max_non_split_rounding_mb (PR #136174)
  std::array<uint64_t, kRoundUpPowerOfTwoIntervals> roundup_power2_divisions{};  // 0: plain 512 B rounding
  double garbage_collection_threshold = 0;  // 0: off; only acts with a memory fraction set
  bool expandable_segments = false;
  std::optional<double>
      memory_fraction;             // per_process_memory_fraction (newer torch): as set_per_process_memory_fraction
  bool cuda_malloc_async = false;  // backend:cudaMallocAsync: the driver's pool, which cannot be replayed
  std::string text;                // the settings as given (empty: the defaults)

  bool operator==(const TorchAllocatorConfig& other) const;
};

// Applies `text` to `config` as AcceleratorAllocatorConfig::parseArgs does: max_split_size, the rounding divisions and
// the garbage-collection threshold go back to their defaults first (every call, also torch.cuda.memory.
// _set_allocator_settings), while expandable_segments and max_non_split_rounding_mb keep their last value unless the
// text names them. Unknown keys are skipped, as PyTorch skips them. Returns an error sentence for a value PyTorch
// refuses (TORCH_CHECK), naming the key.
std::optional<std::string> apply_alloc_conf(std::string_view text, TorchAllocatorConfig& config);

// AcceleratorAllocatorConfig::roundup_power2_divisions(size): the interval of `size` is floor(log2(size)) - 20,
// clamped to [0, 15].
uint64_t roundup_power2_divisions(const TorchAllocatorConfig& config, uint64_t size);
// DeviceCachingAllocator::roundup_power2_next_division.
uint64_t roundup_power2_next_division(uint64_t size, uint64_t divisions);
// DeviceCachingAllocator::round_size: the block size a request of `size` bytes gets.
uint64_t round_size(const TorchAllocatorConfig& config, uint64_t size);
// DeviceCachingAllocator::get_allocation_size: the segment cudaMalloc'd for a block of `size` (rounded) bytes.
uint64_t allocation_size(uint64_t rounded_size);
// get_pool: the small pool holds blocks of rounded size <= 1 MiB.
inline bool is_small_request(uint64_t rounded_size) { return rounded_size <= kSmallSize; }

// The revisions of PyTorch's source the policy was checked against, rule by rule (for the report's header: a trace
// of another torch is replayed by the same rules, and its self-check says whether they still hold).
inline constexpr const char* kPolicyCheckedAgainst =
    "c10/cuda/CUDACachingAllocator.cpp at 001074d25084 and b944315b93d3, c10/core/AllocatorConfig.cpp at 065861fba759";

// A short label for reports: "default" for the empty text, else the text.
std::string config_label(const TorchAllocatorConfig& config);

}  // namespace gmt::replay
