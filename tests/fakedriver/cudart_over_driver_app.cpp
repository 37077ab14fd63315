// An app of the CUDA runtime over a driver (TEST FIXTURES both: the simulated runtime, tests/simcuda, and the fake
// driver, fake_cuda.cpp), run by test_cudart_device.py under `run --backend runtime`. The real runtime makes its
// device's primary context current to the thread and operates on whatever context is current; the simulated one
// knows nothing of the driver, so this app sets both itself. Its last allocation runs with device 1 set in the
// runtime and device 0's context current: a runtime call operates on the current context, so the hooks name
// device 0 (interpose/context_device.h).
#undef CUDA_API_PER_THREAD_DEFAULT_STREAM
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>

namespace {

int g_failures = 0;

void expect(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "cudart_over_driver_app: %s failed\n", what);
  ++g_failures;
}

CUcontext context_of(int device) {  // the fake driver's contexts: 0x1000 for device 0, 0x2000 for device 1
  return reinterpret_cast<CUcontext>(uintptr_t{0x1000} * static_cast<uintptr_t>(device + 1));
}

void* allocate(size_t bytes) {
  void* p = nullptr;
  expect(cudaMalloc(&p, bytes) == cudaSuccess, "cudaMalloc");
  return p;
}

}  // namespace

int main() {
  void* on_first = allocate(1 << 20);
  expect(cudaSetDevice(1) == cudaSuccess && cuCtxSetCurrent(context_of(1)) == CUDA_SUCCESS, "device 1");
  void* on_second = allocate(2 << 20);
  expect(cuCtxSetCurrent(context_of(0)) == CUDA_SUCCESS, "device 0's context");
  void* on_context = allocate(3 << 20);
  expect(cudaFree(on_context) == cudaSuccess, "cudaFree");
  expect(cudaSetDevice(1) == cudaSuccess && cuCtxSetCurrent(context_of(1)) == CUDA_SUCCESS, "device 1 again");
  expect(cudaFree(on_second) == cudaSuccess, "cudaFree");
  expect(cudaSetDevice(0) == cudaSuccess && cuCtxSetCurrent(context_of(0)) == CUDA_SUCCESS, "device 0 again");
  expect(cudaFree(on_first) == cudaSuccess, "cudaFree");
  std::printf("cudart_over_driver_app: %s\n", g_failures == 0 ? "done" : "failed");
  return g_failures == 0 ? 0 : 1;
}
