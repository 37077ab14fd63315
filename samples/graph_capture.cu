// A CUDA graph built by stream capture, with stream-ordered allocations inside the capture: how CUDA and C++
// engines build their graphs. A profiler must not break it: while a stream captures in global mode, any call that
// is not stream-ordered, made on any thread, invalidates the capture and the app's cudaStreamEndCapture fails.
//
// Usage: graph_capture <global|thread_local|relaxed> [launches=3] [--keep] [--side-thread]
//   The graph: a = cudaMallocAsync(32 MiB); fill a; b = cudaMallocAsync(8 MiB); sum a into b; sum b into `result`
//   (allocated before the capture); cudaFreeAsync(b); cudaFreeAsync(a) unless --keep.
//   Each launch's result is checked on the host: the program prints "checksum ok" and exits 0, or says what
//   differs and exits 1.
//   --keep: the graph keeps `a` after its launch. The program frees it with cudaFreeAsync after every launch but
//   the last, so one 32 MiB allocation is left at exit: a leak named at the LEAK-SITE line.
//   --side-thread: another thread allocates and frees on a stream of its own all through the capture. It switches
//   itself to relaxed capture mode first, as a library thread must: in global mode CUDA forbids even stream-ordered
//   allocations on other threads while a capture runs (seen on the H200).
#include <cuda_runtime.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "sample_common.h"

namespace {

constexpr size_t kBigBytes = 32u << 20;
constexpr size_t kSmallBytes = 8u << 20;
constexpr unsigned kBigWords = kBigBytes / sizeof(unsigned);
constexpr unsigned kSmallWords = kSmallBytes / sizeof(unsigned);

__global__ void fill(unsigned* a, unsigned n, unsigned seed) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) a[i] = (i % 7) + seed;
}

// b[j] = sum of a[j], a[j + m], a[j + 2m], ... (m = the words of b).
__global__ void fold(const unsigned* a, unsigned n, unsigned* b, unsigned m) {
  for (unsigned j = blockIdx.x * blockDim.x + threadIdx.x; j < m; j += gridDim.x * blockDim.x) {
    unsigned s = 0;
    for (unsigned i = j; i < n; i += m) s += a[i];
    b[j] = s;
  }
}

__global__ void total(const unsigned* b, unsigned m, unsigned long long* result) {
  unsigned long long s = 0;
  for (unsigned j = blockIdx.x * blockDim.x + threadIdx.x; j < m; j += gridDim.x * blockDim.x) s += b[j];
  atomicAdd(result, s);
}

unsigned long long expected_total(unsigned seed) {
  unsigned long long s = 0;
  for (unsigned i = 0; i < kBigWords; ++i) s += (i % 7) + seed;
  return s;
}

cudaStreamCaptureMode parse_mode(const char* text) {
  if (std::strcmp(text, "global") == 0) return cudaStreamCaptureModeGlobal;
  if (std::strcmp(text, "thread_local") == 0) return cudaStreamCaptureModeThreadLocal;
  if (std::strcmp(text, "relaxed") == 0) return cudaStreamCaptureModeRelaxed;
  std::fprintf(stderr, "graph_capture: mode must be global, thread_local or relaxed, not %s\n", text);
  std::exit(2);
}

// Inside the capture: these calls become graph nodes. `a` is the big allocation.
__attribute__((noinline)) unsigned* capture_big_allocation(cudaStream_t stream) {
  void* a = nullptr;
  SAMPLE_CHECK(cudaMallocAsync(&a, kBigBytes, stream));  // LEAK-SITE: capture_big_allocation
  return static_cast<unsigned*>(a);
}

void capture_work(cudaStream_t stream, unsigned long long* result, bool keep, unsigned** kept) {
  unsigned* a = capture_big_allocation(stream);
  fill<<<264, 256, 0, stream>>>(a, kBigWords, 3);
  void* b = nullptr;
  SAMPLE_CHECK(cudaMallocAsync(&b, kSmallBytes, stream));
  fold<<<264, 256, 0, stream>>>(a, kBigWords, static_cast<unsigned*>(b), kSmallWords);
  SAMPLE_CHECK(cudaMemsetAsync(result, 0, sizeof *result, stream));
  total<<<264, 256, 0, stream>>>(static_cast<unsigned*>(b), kSmallWords, result);
  SAMPLE_CHECK(cudaFreeAsync(b, stream));
  if (!keep) SAMPLE_CHECK(cudaFreeAsync(a, stream));
  *kept = a;
}

void side_thread(std::atomic<bool>* stop, std::atomic<int>* pairs) {
  SAMPLE_CHECK(cudaSetDevice(0));
  cudaStreamCaptureMode relaxed = cudaStreamCaptureModeRelaxed;
  SAMPLE_CHECK(cudaThreadExchangeStreamCaptureMode(&relaxed));
  cudaStream_t stream;
  SAMPLE_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  while (!stop->load()) {
    void* p = nullptr;
    SAMPLE_CHECK(cudaMallocAsync(&p, 1 << 20, stream));
    SAMPLE_CHECK(cudaFreeAsync(p, stream));
    pairs->fetch_add(1);
  }
  SAMPLE_CHECK(cudaStreamSynchronize(stream));
  SAMPLE_CHECK(cudaStreamDestroy(stream));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: graph_capture <global|thread_local|relaxed> [launches=3] [--keep] [--side-thread]\n");
    return 2;
  }
  cudaStreamCaptureMode mode = parse_mode(argv[1]);
  int launches = 3;
  bool keep = false, side = false;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--keep") == 0) {
      keep = true;
    } else if (std::strcmp(argv[i], "--side-thread") == 0) {
      side = true;
    } else {
      launches = std::atoi(argv[i]);
    }
  }

  SAMPLE_CHECK(cudaSetDevice(0));
  cudaStream_t stream;
  SAMPLE_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  unsigned long long* result = nullptr;
  SAMPLE_CHECK(cudaMalloc(&result, sizeof *result));

  std::atomic<bool> stop{false};
  std::atomic<int> side_pairs{0};
  std::thread side_worker;
  if (side) {
    side_worker = std::thread(side_thread, &stop, &side_pairs);
    while (side_pairs.load() < 100) std::this_thread::yield();  // the side thread is busy when capture begins
  }

  SAMPLE_CHECK(cudaStreamBeginCapture(stream, mode));
  unsigned* kept = nullptr;
  capture_work(stream, result, keep, &kept);
  cudaGraph_t graph = nullptr;
  SAMPLE_CHECK(cudaStreamEndCapture(stream, &graph));
  if (side) {
    stop.store(true);
    side_worker.join();
  }
  cudaGraphExec_t exec = nullptr;
  SAMPLE_CHECK(cudaGraphInstantiate(&exec, graph, 0));

  const unsigned long long want = expected_total(3);
  for (int launch = 0; launch < launches; ++launch) {
    SAMPLE_CHECK(cudaGraphLaunch(exec, stream));
    unsigned long long got = 0;
    SAMPLE_CHECK(cudaMemcpyAsync(&got, result, sizeof got, cudaMemcpyDeviceToHost, stream));
    SAMPLE_CHECK(cudaStreamSynchronize(stream));
    if (got != want) {
      std::fprintf(stderr, "graph_capture: launch %d summed %llu, expected %llu\n", launch, got, want);
      return 1;
    }
    // A graph that keeps its allocation cannot be launched again until it is freed.
    if (keep && launch + 1 < launches) SAMPLE_CHECK(cudaFreeAsync(kept, stream));
  }
  SAMPLE_CHECK(cudaStreamSynchronize(stream));
  SAMPLE_CHECK(cudaGraphExecDestroy(exec));
  SAMPLE_CHECK(cudaGraphDestroy(graph));
  SAMPLE_CHECK(cudaFree(result));
  SAMPLE_CHECK(cudaStreamDestroy(stream));

  std::printf("checksum ok: %d launches, %llu each\n", launches, want);
  LeakTruth truth;
  if (keep) truth.leak(kBigBytes);
  truth.print();
  std::printf("expected: graph_allocations=%d graph_frees=%d\n", 2 * launches, 2 * launches - (keep ? 1 : 0));
  return 0;
}
