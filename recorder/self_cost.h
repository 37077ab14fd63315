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

#include "recorder/event_clock.h"

namespace gmt::recorder {

inline constexpr uint32_t kSelfCostSampleEvery = 64;  // a power of two

// The two kinds of event whose cost differs: a CUDA-level allocation or free, and a framework's block (PyTorch's
// tensors, taken inside its allocator with the deepest stacks).
enum class CostedKind : int { Cuda = 0, Block = 1 };

// A sampled event's measured time. Called only for sampled events (SelfCostTimer decides).
void add_self_cost_sample(CostedKind kind, uint64_t ns);

// Where a sampled block event's time goes, phase by phase (meta self_cost_block_phase_ns), so that the next change
// to the hot path is aimed at its largest part: the native walk (or its stored answer), the Python chain's key, the
// stack memo's lookup, the Python frames read and merged (a memo miss), the stack's id (hash, cache, intern), and
// the rest of the record (the buffer append).
enum class CostPhase : int { Walk = 0, PythonKey, Memo, PythonMerge, StackId, Append };
inline constexpr int kCostPhases = 6;

struct SelfCostTotals {
  uint64_t sampled[2] = {0, 0};  // by CostedKind
  uint64_t ns[2] = {0, 0};
  uint64_t preempted = 0;      // samples left out: the thread was off its core for part of them
  uint64_t phase_samples = 0;  // block events timed phase by phase (those whose stack record() took itself)
  uint64_t phase_ns[kCostPhases] = {};
  // Of those, the ones whose walk phase took over kLongWalkNs (a fresh walk: no stored answer, rules read), and
  // their walk time: a mean over a few thousand samples is moved most by these, so the check's own cost is read
  // apart from them.
  uint64_t long_walks = 0;
  uint64_t long_walk_ns = 0;
};
inline constexpr uint64_t kLongWalkNs = 4000;
SelfCostTotals self_cost_totals();

// Events of this thread before its next timed one (self_cost.cpp draws each gap). Not the thread's first event: it
// pays for registering the thread, once.
inline thread_local uint32_t t_events_until_sample __attribute__((tls_model("initial-exec"))) =
    kSelfCostSampleEvery / 2 - 1;

// The countdown reached zero: draws the gap to the thread's next timed event.
void start_next_sample_gap();

// Whether this thread's next event is one to time: one in kSelfCostSampleEvery of the thread's events on average.
// Inline: on every event of the hook path, where two out-of-line calls cost ~20 instructions per event (callgrind,
// 2026-12-07).
inline bool self_cost_sample_this_event() {
  if (__builtin_expect(t_events_until_sample != 0, 1)) {
    --t_events_until_sample;
    return false;
  }
  start_next_sample_gap();
  return true;
}

// While a sampled event is timed by record(): the time its current phase began (0: this event is not timed, and
// mark_cost_phase costs a thread-local load and a branch), and each phase's time so far.
inline thread_local uint64_t t_cost_phase_start __attribute__((tls_model("initial-exec"))) = 0;
inline thread_local uint64_t t_cost_phase_ns[kCostPhases] __attribute__((tls_model("initial-exec")));

// Ends the phase `phase` of the event being timed, if one is.
inline void mark_cost_phase(CostPhase phase) {
  if (__builtin_expect(t_cost_phase_start == 0, 1)) return;
  const uint64_t now = event_time_ns();
  t_cost_phase_ns[static_cast<int>(phase)] += now - t_cost_phase_start;
  t_cost_phase_start = now;
}

// A timed block event's phases (t_cost_phase_ns), added to the totals unless it was preempted.
void add_self_cost_phases(const uint64_t (&ns)[kCostPhases]);

}  // namespace gmt::recorder
