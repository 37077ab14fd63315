// One program built twice, before and after a change, for `gpumemtrace diff`: `regressing_base` and
// `regressing_new` (-DREGRESSING_NEW). The change leaks one more workspace (a leak that grew), adds a
// result cache it never frees (a new leak), and frees the staging buffer it used to leak (a leak gone);
// the weights leak the same in both. Both builds come from this one file, so every call site keeps its
// source line and a diff must match the stacks by function and line, not by address.
#include <cuda_runtime.h>

#include "sample_common.h"

namespace {

LeakTruth truth;
#ifdef REGRESSING_NEW
constexpr int kWorkspaces = 4;
constexpr bool kNewBuild = true;
#else
constexpr int kWorkspaces = 3;
constexpr bool kNewBuild = false;
#endif

__attribute__((noinline)) void load_weights(size_t bytes) {
  void* weights = nullptr;
  SAMPLE_CHECK(cudaMalloc(&weights, bytes));  // LEAK-SITE: load_weights
  truth.leak(bytes);
}

__attribute__((noinline)) void make_workspace(size_t bytes) {
  void* workspace = nullptr;
  SAMPLE_CHECK(cudaMalloc(&workspace, bytes));  // LEAK-SITE: make_workspace
  truth.leak(bytes);
}

__attribute__((noinline)) void stage_inputs(size_t bytes) {
  void* staging = nullptr;
  SAMPLE_CHECK(cudaMalloc(&staging, bytes));  // LEAK-SITE: stage_inputs (base build only)
  if (kNewBuild) {
    SAMPLE_CHECK(cudaFree(staging));  // the change fixed this leak
  } else {
    truth.leak(bytes);
  }
}

__attribute__((noinline)) void cache_results(size_t bytes) {
  void* cache = nullptr;
  SAMPLE_CHECK(cudaMalloc(&cache, bytes));  // LEAK-SITE: cache_results (new build only)
  truth.leak(bytes);
}

__attribute__((noinline)) void temporaries() {
  for (int i = 0; i < 5; ++i) {
    void* tmp = nullptr;
    SAMPLE_CHECK(cudaMalloc(&tmp, 1 << 20));
    SAMPLE_CHECK(cudaFree(tmp));
  }
}

}  // namespace

int main() {
  load_weights(2 << 20);                                            // 2 MiB in both builds
  for (int i = 0; i < kWorkspaces; ++i) make_workspace(128 << 10);  // 3 or 4 x 128 KiB
  stage_inputs(64 << 10);                                           // 64 KiB leaked by the base build only
  if (kNewBuild) cache_results(256 << 10);                          // 256 KiB leaked by the new build only
  temporaries();
  SAMPLE_CHECK(cudaDeviceSynchronize());
  truth.print();
  return 0;
}
