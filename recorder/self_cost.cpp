#include "recorder/self_cost.h"

#include <atomic>
#include <cstdint>

namespace gmt::recorder {
namespace {

// Shared totals, touched once per kSelfCostSampleEvery events of a thread: no line is fought over per event.
std::atomic<uint64_t> g_sampled[2];
std::atomic<uint64_t> g_ns[2];
std::atomic<uint64_t> g_preempted;
std::atomic<uint64_t> g_phase_samples;
std::atomic<uint64_t> g_phase_ns[kCostPhases];
std::atomic<uint64_t> g_long_walks;
std::atomic<uint64_t> g_long_walk_ns;

// A sample this long was interrupted: the scheduler gave the core to another thread for a while (a time slice is
// milliseconds; the longest event of our own, a first stack with new Python frames to intern, takes tens of us).
// Left out of the mean, where a few would outweigh thousands of events.
constexpr uint64_t kPreemptedNs = 200'000;

}  // namespace

// The gap to the next sampled event is drawn from [kSelfCostSampleEvery / 2, 3 * kSelfCostSampleEvery / 2), mean
// kSelfCostSampleEvery: with a fixed gap, a training step whose events repeat with a period sharing a factor with it
// would have the same few places timed step after step (seen: 1879 events timed of a 1204-event step, the phases
// swinging from one run to the next).
thread_local uint32_t t_sample_rng __attribute__((tls_model("initial-exec"))) = 0;

void start_next_sample_gap() {
  uint32_t x = t_sample_rng;
  if (x == 0) x = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(&t_sample_rng) >> 4) | 1u;  // per thread
  x ^= x << 13;                                                                                 // xorshift32
  x ^= x >> 17;
  x ^= x << 5;
  t_sample_rng = x;
  t_events_until_sample = kSelfCostSampleEvery / 2 + x % kSelfCostSampleEvery - 1;
}

void add_self_cost_sample(CostedKind kind, uint64_t ns) {
  const int k = static_cast<int>(kind);
  if (ns > kPreemptedNs) {  // the thread lost its core meanwhile: not our time
    g_preempted.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  g_sampled[k].fetch_add(1, std::memory_order_relaxed);
  g_ns[k].fetch_add(ns, std::memory_order_relaxed);
}

void add_self_cost_phases(const uint64_t (&ns)[kCostPhases]) {
  uint64_t total = 0;
  for (uint64_t phase : ns) total += phase;
  if (total > kPreemptedNs) return;  // counted as preempted by add_self_cost_sample
  g_phase_samples.fetch_add(1, std::memory_order_relaxed);
  for (int p = 0; p < kCostPhases; ++p) g_phase_ns[p].fetch_add(ns[p], std::memory_order_relaxed);
  const uint64_t walk = ns[static_cast<int>(CostPhase::Walk)];
  if (walk > kLongWalkNs) {
    g_long_walks.fetch_add(1, std::memory_order_relaxed);
    g_long_walk_ns.fetch_add(walk, std::memory_order_relaxed);
  }
}

SelfCostTotals self_cost_totals() {
  SelfCostTotals totals;
  for (int k = 0; k < 2; ++k) {
    totals.sampled[k] = g_sampled[k].load(std::memory_order_relaxed);
    totals.ns[k] = g_ns[k].load(std::memory_order_relaxed);
  }
  totals.preempted = g_preempted.load(std::memory_order_relaxed);
  totals.phase_samples = g_phase_samples.load(std::memory_order_relaxed);
  for (int p = 0; p < kCostPhases; ++p) totals.phase_ns[p] = g_phase_ns[p].load(std::memory_order_relaxed);
  totals.long_walks = g_long_walks.load(std::memory_order_relaxed);
  totals.long_walk_ns = g_long_walk_ns.load(std::memory_order_relaxed);
  return totals;
}

}  // namespace gmt::recorder
