#include "analysis/model/allocation_slices.h"

#include <algorithm>
#include <optional>

namespace gmt::analysis {
namespace {

// Larger first; of equal sizes the earlier allocation.
bool keeps_before(const Lifetime& a, const Lifetime& b) {
  return a.size != b.size ? a.size > b.size : a.event_id < b.event_id;
}

bool counted(const Lifetime& life) { return life.level == LifeLevel::Cuda || life.level == LifeLevel::Block; }

}  // namespace

// The heap's top is the life that goes first when a better one comes.
bool SliceCollector::KeptLast::operator()(const Lifetime& a, const Lifetime& b) const { return keeps_before(a, b); }

SliceCollector::SliceCollector(AllocationSlices& slices, int64_t duration_ns, const SliceLimits& limits)
    : slices_(slices) {
  const size_t windows = std::max<size_t>(1, limits.windows);
  per_window_ = std::max<size_t>(1, limits.max_slices / windows);
  window_ns_ = std::max<int64_t>(1, (duration_ns + static_cast<int64_t>(windows) - 1) / static_cast<int64_t>(windows));
  kept_.resize(windows);
  slices_.window_ns = window_ns_;
  slices_.per_window = per_window_;
  slices_.duration_ns = duration_ns;
}

void SliceCollector::on_begin(const Lifetime& life) {
  if (counted(life)) ++slices_.lives;
}

void SliceCollector::on_end(const Lifetime& life) {
  if (counted(life)) offer(life);
}

void SliceCollector::offer(const Lifetime& life) {
  const size_t window =
      std::min(kept_.size() - 1, static_cast<size_t>(std::max<int64_t>(0, life.alloc_ns) / window_ns_));
  auto& kept = kept_[window];
  if (kept.size() < per_window_) {
    kept.push(life);
    return;
  }
  if (!keeps_before(life, kept.top())) return drop(life);
  drop(kept.top());
  kept.pop();
  kept.push(life);
}

void SliceCollector::drop(const Lifetime& life) {
  SummedLives& summed = slices_.not_shown[life.device];
  ++summed.lives;
  summed.bytes += life.size;
}

void SliceCollector::finish(const LifetimeWalk& walk, const TraceFile& trace) {
  for (const Lifetime& life : walk.live_at_end) {
    if (counted(life)) offer(life);
  }
  for (auto& kept : kept_) {
    while (!kept.empty()) {
      slices_.shown.push_back(kept.top());
      kept.pop();
    }
  }
  std::sort(slices_.shown.begin(), slices_.shown.end(), [](const Lifetime& a, const Lifetime& b) {
    return a.alloc_ns != b.alloc_ns ? a.alloc_ns < b.alloc_ns : a.event_id < b.event_id;
  });
  slices_.duration_ns = std::max(slices_.duration_ns, walk.duration_ns);
  StackLoader loader(trace);
  for (const Lifetime& life : slices_.shown) {
    if (life.stack_id != 0 && !slices_.stacks.count(life.stack_id)) {
      slices_.stacks.emplace(life.stack_id, loader.load(life.stack_id));
    }
  }
}

AllocationSlices collect_allocation_slices(const TraceFile& trace, const EventFilters& filters, int64_t duration_ns,
                                           const SliceLimits& limits) {
  AllocationSlices slices;
  std::optional<SliceCollector> collector;
  // Made anew when the walk starts over (the first reset makes it).
  struct Forward : LifetimeSink {
    std::optional<SliceCollector>* to = nullptr;
    void on_begin(const Lifetime& life) override { (*to)->on_begin(life); }
    void on_end(const Lifetime& life) override { (*to)->on_end(life); }
  } forward;
  forward.to = &collector;
  const LifetimeWalk walk = walk_lifetimes(trace, filters, forward, [&] {
    slices = AllocationSlices{};
    collector.emplace(slices, duration_ns, limits);
  });
  collector->finish(walk, trace);
  return slices;
}

}  // namespace gmt::analysis
