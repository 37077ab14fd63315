// What recording costs the app's threads, measured by the recorder itself on a sample of its own work, so that a
// user reads the profiler's cost on their own run (`run`'s summary; meta host_ns_per_*_event).
//
// Why sampled: reading the clock twice per event would cost ~30 ns on the H200 hosts (recorder/event_clock.h),
// ~10% of a block event. One event in kSelfCostSampleEvery of each thread is timed, from the start of its stack
// capture to its record's end; the mean over the sample estimates the mean over all events (every event is as
// likely to be sampled). What is timed is the recorder's share: the stack walk, Python frames, interning and the
// buffer append. What is not: the hook's own call of the real CUDA function (the app's cost anyway) and the cache
// lines the app later fetches again (measured only by a side-by-side benchmark: docs/benchmarks.md).
#pragma once

#include <cstdint>

namespace gmt::recorder {

inline constexpr uint32_t kSelfCostSampleEvery = 64;  // a power of two

// The two kinds of event whose cost differs: a CUDA-level allocation or free, and a framework's block (PyTorch's
// tensors, taken inside its allocator with the deepest stacks).
enum class CostedKind : int { Cuda = 0, Block = 1 };

// A sampled event's measured time. Called only for sampled events (SelfCostTimer decides).
void add_self_cost_sample(CostedKind kind, uint64_t ns);

struct SelfCostTotals {
  uint64_t sampled[2] = {0, 0};  // by CostedKind
  uint64_t ns[2] = {0, 0};
  uint64_t preempted = 0;  // samples left out: the thread was off its core for part of them
};
SelfCostTotals self_cost_totals();

// Whether this thread's next event is one to time: every kSelfCostSampleEvery-th of the thread's events.
bool self_cost_sample_this_event();

}  // namespace gmt::recorder
