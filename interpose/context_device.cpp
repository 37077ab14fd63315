#include "interpose/context_device.h"

#include <atomic>

#include "interpose/driver_api.h"
#include "interpose/driver_hook_table.h"
#include "recorder/cache_hints.h"

namespace gmt::interpose {
namespace {

// cuCtxGetDevice is what made a hooked event dear with 8 threads allocating at once on the H200 (1.46x of a raw
// cudaMallocAsync pair with it, 1.10x without; cuCtxGetCurrent, still asked every time, costs nothing there:
// docs/benchmarks.md), hence the answer kept per thread. Every destruction counts itself in progress while it
// runs, when no answer is kept or used, and moves the generation on when it is done, which makes every answer
// kept before stale. Both counts share one atomic word, so that an event reads them with one load from one cache
// line: the destructions running in the low bits, the generation above them.
constexpr int kGenerationShift = 20;  // up to 2^20 - 1 destructions at once
constexpr uint64_t kRunningMask = (uint64_t{1} << kGenerationShift) - 1;
std::atomic<uint64_t> g_context_destructions{0};

struct ContextDevice {
  uint64_t context = 0;
  uint64_t generation = 0;
  int16_t device = -1;
};
thread_local ContextDevice t_context_device __attribute__((tls_model("initial-exec")));

}  // namespace

GMT_HOT uint64_t current_context() {
  CUcontext context = nullptr;
  auto get_current = GMT_DRIVER_REAL(cuCtxGetCurrent);
  if (get_current && get_current(&context) == CUDA_SUCCESS) return reinterpret_cast<uint64_t>(context);
  return 0;
}

GMT_HOT int16_t device_of_current_context(uint64_t context) {
  if (context == 0) return -1;  // none current: the driver would say CUDA_ERROR_INVALID_CONTEXT
  const uint64_t destructions = g_context_destructions.load(std::memory_order_acquire);
  const bool settled = (destructions & kRunningMask) == 0;
  const uint64_t generation = destructions >> kGenerationShift;
  ContextDevice& kept = t_context_device;
  if (settled && kept.context == context && kept.generation == generation) return kept.device;
  CUdevice device = -1;
  auto get_device = GMT_DRIVER_REAL(cuCtxGetDevice);
  if (!get_device || get_device(&device) != CUDA_SUCCESS) return -1;
  if (settled) kept = ContextDevice{context, generation, static_cast<int16_t>(device)};
  return static_cast<int16_t>(device);
}

ContextDestruction::ContextDestruction() { g_context_destructions.fetch_add(1, std::memory_order_acq_rel); }

// One running less and the generation one on, in one step: generation += 1 << shift, running -= 1.
ContextDestruction::~ContextDestruction() {
  g_context_destructions.fetch_add((uint64_t{1} << kGenerationShift) - 1, std::memory_order_acq_rel);
}

}  // namespace gmt::interpose
