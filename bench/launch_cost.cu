// What the profiler costs the CUDA calls that are not allocations: a training step makes thousands of them (kernel
// launches, event records, stream queries) for every few hundred allocations, and a backend that slows each by a
// fraction of a microsecond shows in a host-bound step although it records nothing there. One thread, on one
// stream, for each case: BATCH calls timed together (wall clock; few enough that a launch never waits for room in
// the GPU's queue), then a synchronize outside the timing; the minimum over the repetitions of the median batch.
// Prints one "case: N ns" line per case (host ns per call). Run raw and under `gpumemtrace run` by
// bench/launch_cost.py, which prints the differences side by side.
// Usage: launch_cost [batches=400]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_check.h"

namespace {

constexpr int kBatch = 128;
constexpr int kRepetitions = 5;

__global__ void empty_kernel() {}

enum class Case { Launch, EventRecord, StreamQuery, GetDevice };

struct Named {
  Case kind;
  const char* name;
};
constexpr Named kCases[] = {{Case::Launch, "kernel launch"},
                            {Case::EventRecord, "cudaEventRecord"},
                            {Case::StreamQuery, "cudaStreamQuery"},
                            {Case::GetDevice, "cudaGetDevice"}};

void call_once(Case kind, cudaStream_t stream, cudaEvent_t event) {
  int device = 0;
  switch (kind) {
    case Case::Launch: empty_kernel<<<1, 1, 0, stream>>>(); break;
    case Case::EventRecord: CHECK(cudaEventRecord(event, stream)); break;
    case Case::StreamQuery:
      (void)cudaStreamQuery(stream);  // cudaErrorNotReady is an answer, not a failure
      break;
    case Case::GetDevice: CHECK(cudaGetDevice(&device)); break;
  }
}

// Host ns per call: the median of `batches` timed batches.
double ns_per_call(Case kind, cudaStream_t stream, cudaEvent_t event, int batches) {
  std::vector<double> per_call;
  per_call.reserve(static_cast<size_t>(batches));
  for (int b = 0; b < batches; ++b) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kBatch; ++i) call_once(kind, stream, event);
    auto end = std::chrono::steady_clock::now();
    CHECK(cudaStreamSynchronize(stream));
    per_call.push_back(std::chrono::duration<double, std::nano>(end - start).count() / kBatch);
  }
  CHECK(cudaGetLastError());
  std::nth_element(per_call.begin(), per_call.begin() + batches / 2, per_call.end());
  return per_call[static_cast<size_t>(batches / 2)];
}

}  // namespace

int main(int argc, char** argv) {
  const int batches = argc > 1 ? std::max(1, std::atoi(argv[1])) : 400;
  cudaStream_t stream;
  cudaEvent_t event;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  for (const Named& c : kCases) ns_per_call(c.kind, stream, event, std::min(batches, 20));  // warm-up
  for (const Named& c : kCases) {
    double best = 1e300;
    for (int r = 0; r < kRepetitions; ++r) best = std::min(best, ns_per_call(c.kind, stream, event, batches));
    std::printf("%s: %.1f ns\n", c.name, best);
  }
  // One allocation, so that a profiled run has an event to show that it recorded at all.
  void* p = nullptr;
  CHECK(cudaMalloc(&p, 1 << 20));
  CHECK(cudaFree(p));
  CHECK(cudaEventDestroy(event));
  CHECK(cudaStreamDestroy(stream));
  return 0;
}
