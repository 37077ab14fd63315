// A training-style loop in a steady state: the weights are allocated once, then every iteration allocates
// the same working set (activations and a workspace) and frees all of it again. Live memory goes up and
// down inside each iteration and comes back to the same level after it: gpumemtrace must find no growth.
//
//   steady_state [ITERATIONS]   (default 200)
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdlib>

#include "sample_common.h"

namespace {

constexpr size_t kMiB = size_t{1} << 20;

__attribute__((noinline)) void* load_weights(size_t bytes) {
  void* weights = nullptr;
  SAMPLE_CHECK(cudaMalloc(&weights, bytes));
  return weights;
}

// One training step: activations for four layers and a workspace, freed in reverse order.
__attribute__((noinline)) void train_step(int step) {
  void* activations[4] = {};
  for (int layer = 0; layer < 4; ++layer) {
    SAMPLE_CHECK(cudaMalloc(&activations[layer], (layer + 1) * kMiB));
  }
  void* workspace = nullptr;
  SAMPLE_CHECK(cudaMalloc(&workspace, (step % 2 == 0 ? 3 : 5) * kMiB));  // varies, but is always freed
  usleep(200);                                                           // the "kernels"
  SAMPLE_CHECK(cudaFree(workspace));
  for (int layer = 3; layer >= 0; --layer) SAMPLE_CHECK(cudaFree(activations[layer]));
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 200;
  LeakTruth truth;
  void* weights = load_weights(64 * kMiB);
  for (int step = 0; step < iterations; ++step) train_step(step);
  SAMPLE_CHECK(cudaFree(weights));
  truth.print();
  return 0;
}
