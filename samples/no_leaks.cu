// A program that frees everything it allocates, through every allocation API: it must report no leaks.
#include <cuda_runtime.h>

#include "sample_common.h"

__global__ void scale(float* data, size_t n) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) data[i] *= 2.0f;
}

int main() {
  LeakTruth truth;
  cudaStream_t stream;
  SAMPLE_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int step = 0; step < 20; ++step) {
    size_t n = (step + 1) * 4096;
    float* device = nullptr;
    SAMPLE_CHECK(cudaMalloc(&device, n * sizeof(float)));
    scale<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(device, n);
    SAMPLE_CHECK(cudaGetLastError());

    void* managed = nullptr;
    SAMPLE_CHECK(cudaMallocManaged(&managed, 8192));
    void* pinned = nullptr;
    SAMPLE_CHECK(cudaHostAlloc(&pinned, 16384, cudaHostAllocDefault));
    void* pitched = nullptr;
    size_t pitch = 0;
    SAMPLE_CHECK(cudaMallocPitch(&pitched, &pitch, 1000, 16));
    cudaPitchedPtr volume{};
    SAMPLE_CHECK(cudaMalloc3D(&volume, make_cudaExtent(256, 8, 4)));
    void* async_buffer = nullptr;
    SAMPLE_CHECK(cudaMallocAsync(&async_buffer, 1 << 20, stream));

    SAMPLE_CHECK(cudaFreeAsync(async_buffer, stream));
    SAMPLE_CHECK(cudaStreamSynchronize(stream));
    SAMPLE_CHECK(cudaFree(volume.ptr));
    SAMPLE_CHECK(cudaFree(pitched));
    SAMPLE_CHECK(cudaFreeHost(pinned));
    SAMPLE_CHECK(cudaFree(managed));
    SAMPLE_CHECK(cudaFree(device));
  }
  SAMPLE_CHECK(cudaStreamDestroy(stream));
  truth.print();
  return 0;
}
