// The simulated runtime's stream-ordered memory pools (README "What is simulated"), split from sim_runtime_test.cpp.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>

#include "tests/simcuda/sim_runtime_fixture.h"

namespace {

using namespace gmt_sim_test;

// A pool's reservation (README "What is simulated"): 2 MiB steps, kept after frees, given back above the release
// threshold at a synchronization, and down to the bytes to keep at a trim.
TEST_F(SimRuntime, APoolKeepsItsReservationUpToItsReleaseThreshold) {
  constexpr std::uint64_t kMiB = 1 << 20;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(cudaMemPoolCreate(&pool, &props), cudaSuccess);
  auto attribute = [&](cudaMemPoolAttr attr) {
    std::uint64_t value = 0;
    EXPECT_EQ(cudaMemPoolGetAttribute(pool, attr, &value), cudaSuccess);
    return value;
  };
  std::uint64_t keep_all = UINT64_MAX;
  ASSERT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all), cudaSuccess);
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(&a, 3 * kMiB, pool, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMallocFromPoolAsync(&b, 1000, pool, nullptr), cudaSuccess);
  EXPECT_EQ(attribute(cudaMemPoolAttrReservedMemCurrent), 4 * kMiB);  // 3 MiB + 1024 B in 2 MiB steps
  ASSERT_EQ(cudaFreeAsync(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  EXPECT_EQ(attribute(cudaMemPoolAttrUsedMemCurrent), 1024u);
  EXPECT_EQ(attribute(cudaMemPoolAttrReservedMemCurrent), 4 * kMiB);  // kept: the threshold is above it

  std::uint64_t threshold = 0;
  ASSERT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold), cudaSuccess);
  EXPECT_EQ(attribute(cudaMemPoolAttrReservedMemCurrent), 4 * kMiB);  // given back at a synchronization only
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(attribute(cudaMemPoolAttrReservedMemCurrent), 2 * kMiB);  // what the live 1024 B need
  EXPECT_EQ(attribute(cudaMemPoolAttrReservedMemHigh), 4 * kMiB);
  ASSERT_EQ(cudaFreeAsync(b, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemPoolTrimTo(pool, 0), cudaSuccess);
  EXPECT_EQ(attribute(cudaMemPoolAttrReservedMemCurrent), 0u);
  EXPECT_EQ(cudaMemPoolDestroy(pool), cudaSuccess);
}

TEST_F(SimRuntime, MemoryPoolsAccountForStreamOrderedAllocations) {
  cudaMemPool_t default_pool = nullptr;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&default_pool, 0), cudaSuccess);
  EXPECT_EQ(cudaMemPoolDestroy(default_pool), cudaErrorInvalidValue);

  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(cudaMemPoolCreate(&pool, &props), cudaSuccess);

  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(cudaMallocAsync(&a, 1000, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMallocFromPoolAsync(&b, 3000, pool, nullptr), cudaSuccess);
  EXPECT_EQ(free_bytes(), kDeviceBytes - 1024 - 3072);
  std::uint64_t used = 0;
  ASSERT_EQ(cudaMemPoolGetAttribute(default_pool, cudaMemPoolAttrUsedMemCurrent, &used), cudaSuccess);
  EXPECT_EQ(used, 1024u);
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used), cudaSuccess);
  EXPECT_EQ(used, 3072u);

  EXPECT_EQ(cudaFreeAsync(b, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used), cudaSuccess);
  EXPECT_EQ(used, 0u);
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &used), cudaSuccess);
  EXPECT_EQ(used, 3072u);
  EXPECT_EQ(cudaMemPoolTrimTo(pool, 0), cudaSuccess);
  EXPECT_EQ(cudaMemPoolDestroy(pool), cudaSuccess);
  EXPECT_EQ(cudaMallocFromPoolAsync(&b, 512, pool, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(a), cudaSuccess);  // stream-ordered memory may be freed synchronously
  EXPECT_EQ(free_bytes(), kDeviceBytes);
}

}  // namespace
