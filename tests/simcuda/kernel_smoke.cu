// An ordinary CUDA program, built by nvcc and linked against the real shared cudart. Run with the
// simulated runtime's folder first on LD_LIBRARY_PATH it must load the stand-in, allocate, copy,
// launch kernels and exit 0; on a machine without a GPU the real runtime would fail the first call.
//
// Kernels are not executed by the simulation, so nothing here depends on what they compute.
#include <cstdio>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

__device__ int g_scale = 3;

__global__ void scale(float* data, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= static_cast<float>(g_scale);
}

#define CHECK(call)                                                                                                   \
  do {                                                                                                                \
    const cudaError_t check_result_ = (call);                                                                         \
    if (check_result_ != cudaSuccess) {                                                                               \
      std::fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call, cudaGetErrorName(check_result_), \
                   cudaGetErrorString(check_result_));                                                                \
      return 1;                                                                                                       \
    }                                                                                                                 \
  } while (0)

int main() {
  int count = 0;
  CHECK(cudaGetDeviceCount(&count));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device 0: %s (%d.%d, %zu bytes)\n", prop.name, prop.major, prop.minor, prop.totalGlobalMem);
  if (std::strstr(prop.name, "Simulated") == nullptr) {
    std::fprintf(stderr, "not running on the simulated runtime\n");
    return 1;
  }

  constexpr int n = 1 << 20;
  std::vector<float> host(n, 1.5f);
  size_t free_before = 0, total = 0;
  CHECK(cudaMemGetInfo(&free_before, &total));

  float* device = nullptr;
  CHECK(cudaMalloc(&device, n * sizeof(float)));
  CHECK(cudaMemcpy(device, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));

  size_t free_after = 0;
  CHECK(cudaMemGetInfo(&free_after, &total));
  if (free_before - free_after != n * sizeof(float)) {
    std::fprintf(stderr, "cudaMemGetInfo did not account for the allocation\n");
    return 1;
  }

  cudaStream_t stream = nullptr;
  CHECK(cudaStreamCreate(&stream));
  scale<<<(n + 255) / 256, 256>>>(device, n);
  CHECK(cudaGetLastError());
  scale<<<(n + 255) / 256, 256, 0, stream>>>(device, n);
  CHECK(cudaGetLastError());
  CHECK(cudaStreamSynchronize(stream));
  CHECK(cudaDeviceSynchronize());

  // A launch the hardware would reject must be rejected here too.
  scale<<<1, 4096>>>(device, n);
  if (cudaGetLastError() != cudaErrorInvalidConfiguration) {
    std::fprintf(stderr, "an oversized block was not rejected\n");
    return 1;
  }

  // __device__ variables are reachable through the symbol API (their initial values live in the
  // device image, which the simulation does not load, so write before reading).
  const int new_scale = 5;
  CHECK(cudaMemcpyToSymbol(g_scale, &new_scale, sizeof new_scale));
  int scale_value = 0;
  CHECK(cudaMemcpyFromSymbol(&scale_value, g_scale, sizeof scale_value));
  if (scale_value != new_scale) {
    std::fprintf(stderr, "__device__ variable did not round-trip\n");
    return 1;
  }
  std::vector<float> back(n);
  CHECK(cudaMemcpy(back.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost));
  if (back != host) {
    std::fprintf(stderr, "device memory did not round-trip\n");
    return 1;
  }

  CHECK(cudaStreamDestroy(stream));
  CHECK(cudaFree(device));
  std::printf("ok: %d device(s), %d launches accepted, g_scale=%d\n", count, 2, scale_value);
  return 0;
}
