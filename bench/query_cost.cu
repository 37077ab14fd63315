// What the pieces of a recorded event cost on this machine, each timed alone in a loop (ns per call, the
// median of 5 repetitions): the driver queries the driver hooks make per event (cuCtxGetCurrent,
// cuCtxGetDevice), cudaGetDevice (the runtime hooks' device), the clock (and what a cheaper one would cost:
// the coarse clock, the TSC), and for scale one
// cudaMallocAsync+cudaFreeAsync pair. Run raw: it explains the "no stacks" columns of bench/overhead.py.
// Usage: query_cost [calls=1000000]
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace {

template <typename Body>
double ns_per_call(int calls, Body body) {
  std::vector<double> runs;
  for (int r = 0; r < 5; ++r) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) body();
    runs.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / calls);
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

volatile unsigned long long g_sink;

}  // namespace

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::atoi(argv[1]) : 1000000;
  if (calls <= 0 || cudaFree(nullptr) != cudaSuccess) {
    std::fprintf(stderr, "usage: query_cost [calls>0] (needs a CUDA device)\n");
    return 2;
  }
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  std::printf("cuCtxGetCurrent: %.1f ns\n", ns_per_call(calls, [] {
                CUcontext context;
                cuCtxGetCurrent(&context);
                g_sink = reinterpret_cast<unsigned long long>(context);
              }));
  std::printf("cuCtxGetDevice: %.1f ns\n", ns_per_call(calls, [] {
                CUdevice device;
                cuCtxGetDevice(&device);
                g_sink = static_cast<unsigned long long>(device);
              }));
  std::printf("cudaGetDevice: %.1f ns\n", ns_per_call(calls, [] {
                int device;
                cudaGetDevice(&device);
                g_sink = static_cast<unsigned long long>(device);
              }));
  std::printf("clock_gettime(CLOCK_MONOTONIC): %.1f ns\n", ns_per_call(calls, [] {
                timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                g_sink = static_cast<unsigned long long>(ts.tv_nsec);
              }));
  std::printf("clock_gettime(CLOCK_MONOTONIC_COARSE): %.1f ns\n", ns_per_call(calls, [] {
                timespec ts;
                clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
                g_sink = static_cast<unsigned long long>(ts.tv_nsec);
              }));
#if defined(__x86_64__)
  std::printf("rdtsc: %.1f ns\n", ns_per_call(calls, [] { g_sink = __rdtsc(); }));
#endif
  std::printf("cudaMallocAsync+cudaFreeAsync 256 B: %.1f ns\n", ns_per_call(calls / 20, [stream] {
                void* p = nullptr;
                cudaMallocAsync(&p, 256, stream);
                cudaFreeAsync(p, stream);
              }));
  cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  return 0;
}
