// Out of memory with plenty of memory free: the device is filled with 16 equal blocks, every other block is
// freed, and then a request for two blocks' worth fails although half the device is free, because no free
// block is that large. Then a request larger than all the free memory fails too: a true out-of-memory.
// Meant for the simulated runtime with a small device (GMT_SIM_DEVICE_BYTES=64M): on a real GPU the driver
// may map scattered pages and satisfy the first request, in which case the program says so.
//
// Prints, besides the usual truth line:
//   truth: oom block_bytes=B fragmented_request=R device_free=F true_oom_request=T
#include <cuda_runtime.h>

#include <vector>

#include "sample_common.h"

namespace {

constexpr int kBlocks = 16;
constexpr size_t kGrain = size_t{2} << 20;  // blocks in whole 2 MiB pages

LeakTruth truth;

__attribute__((noinline)) void* fill_device(size_t bytes) {
  void* block = nullptr;
  SAMPLE_CHECK(cudaMalloc(&block, bytes));
  return block;
}

// Returns true when the request failed with cudaErrorMemoryAllocation, as expected.
__attribute__((noinline)) bool request(size_t bytes) {
  void* buffer = nullptr;
  cudaError_t err = cudaMalloc(&buffer, bytes);  // FAILED-SITE: request
  if (err == cudaErrorMemoryAllocation) {
    truth.failed_allocations += 1;
    cudaGetLastError();
    return true;
  }
  SAMPLE_CHECK(err);
  SAMPLE_CHECK(cudaFree(buffer));
  return false;
}

}  // namespace

int main() {
  SAMPLE_CHECK(cudaFree(nullptr));  // create the context first: its memory is not ours to count
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  SAMPLE_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const size_t block = free_bytes / kBlocks / kGrain * kGrain;
  if (block == 0) {
    std::fprintf(stderr, "the device is too small for this sample\n");
    return 1;
  }
  std::vector<void*> blocks;
  for (int i = 0; i < kBlocks; ++i) blocks.push_back(fill_device(block));
  for (int i = 1; i < kBlocks; i += 2) SAMPLE_CHECK(cudaFree(blocks[i]));
  SAMPLE_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));

  const size_t fragmented_request = 2 * block;         // less than the free memory, more than any free block
  const size_t true_oom_request = free_bytes + block;  // more than all the free memory
  if (!request(fragmented_request)) std::printf("note: the driver found room for %zu bytes\n", fragmented_request);
  if (!request(true_oom_request)) std::printf("note: the driver found room for %zu bytes\n", true_oom_request);
  std::printf("truth: oom block_bytes=%zu fragmented_request=%zu device_free=%zu true_oom_request=%zu\n", block,
              fragmented_request, free_bytes, true_oom_request);

  for (int i = 0; i < kBlocks; i += 2) SAMPLE_CHECK(cudaFree(blocks[i]));
  truth.print();
  return 0;
}
