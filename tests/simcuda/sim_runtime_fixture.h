// The simulated runtime's test fixture, shared by sim_runtime_test.cpp and sim_pool_test.cpp (one test binary): the
// same two-device machine for every test, reset before each.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "schema/environment.h"

namespace gmt_sim_test {

constexpr std::size_t kKiB = 1024;
constexpr std::size_t kMiB = 1024 * kKiB;
constexpr std::size_t kDeviceBytes = 64 * kMiB;

// Static initialisation runs before main(), so before any CUDA call creates the runtime: the same
// two-device machine for every test, whatever the calling environment says.
[[maybe_unused]] inline const bool g_machine_configured = [] {
  setenv(gmt::schema::env::kSimDeviceCount, "2", 1);
  setenv(gmt::schema::env::kSimDeviceBytes, "64M", 1);
  setenv(gmt::schema::env::kSimQuiet, "1", 1);
  return true;
}();

class SimRuntime : public ::testing::Test {
 protected:
  void SetUp() override { use_capacity("64M"); }
  void TearDown() override { cudaSetDevice(0); }

  // Resets both devices with a new capacity; leaves device 0 current and no error pending.
  static void use_capacity(const char* bytes) {
    setenv(gmt::schema::env::kSimDeviceBytes, bytes, 1);
    for (int device = 1; device >= 0; --device) {
      ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
      ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
    }
    cudaGetLastError();
  }

  static std::size_t free_bytes() {
    std::size_t free = 0;
    std::size_t total = 0;
    EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
    return free;
  }

  static std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }
};

}  // namespace gmt_sim_test
