// Fragments device memory on purpose: 20 blocks of 1 to 10 MiB side by side, then every other one freed.
// The kept blocks stay allocated until the process exits (they are reported as leaks), so the trace ends
// with free gaps between live allocations. The program works out the gaps from its own pointers with
// gpumemtrace's definition (docs/analysis.md: block ends rounded up to 512 bytes, only gaps between live
// allocations) and prints:
//   truth: fragmentation allocations=N free_bytes=F largest_gap_bytes=G
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "sample_common.h"

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr int kBlocks = 20;

LeakTruth truth;

__attribute__((noinline)) void* allocate_block(size_t bytes) {
  void* block = nullptr;
  SAMPLE_CHECK(cudaMalloc(&block, bytes));  // LEAK-SITE: allocate_block
  return block;
}

}  // namespace

int main() {
  std::vector<std::pair<uintptr_t, size_t>> kept;
  std::vector<void*> blocks;
  for (int i = 0; i < kBlocks; ++i) blocks.push_back(allocate_block((i % 10 + 1) * kMiB));
  for (int i = 0; i < kBlocks; ++i) {
    const size_t bytes = (i % 10 + 1) * kMiB;
    if (i % 2 == 1) {
      SAMPLE_CHECK(cudaFree(blocks[i]));
    } else {
      kept.emplace_back(reinterpret_cast<uintptr_t>(blocks[i]), bytes);
      truth.leak(bytes);  // kept until exit on purpose
    }
  }

  std::sort(kept.begin(), kept.end());
  uint64_t free_bytes = 0;
  uint64_t largest = 0;
  for (size_t i = 0; i + 1 < kept.size(); ++i) {
    const uint64_t end = (kept[i].first + kept[i].second + 511) / 512 * 512;
    const uint64_t gap = kept[i + 1].first > end ? kept[i + 1].first - end : 0;
    free_bytes += gap;
    largest = std::max(largest, gap);
  }
  std::printf("truth: fragmentation allocations=%zu free_bytes=%llu largest_gap_bytes=%llu\n", kept.size(),
              static_cast<unsigned long long>(free_bytes), static_cast<unsigned long long>(largest));
  truth.print();
  return 0;
}
