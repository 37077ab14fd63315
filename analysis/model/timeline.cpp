#include "analysis/model/timeline.h"

#include <algorithm>
#include <map>
#include <utility>

namespace gmt::analysis {

uint32_t ChangeLog::slot_for(int64_t stack_id, int64_t device, schema::MemoryKind kind) {
  auto [it, inserted] = slot_ids_.try_emplace(SlotKey{stack_id, device, kind}, static_cast<uint32_t>(slots_.size()));
  if (inserted) slots_.push_back(ChangeSlot{stack_id, device, kind});
  return it->second;
}

uint64_t ChangeLog::whole_changes_before(uint64_t position) const {
  const auto end = changes_.begin() + static_cast<ptrdiff_t>(std::min<uint64_t>(position, changes_.size()));
  return static_cast<uint64_t>(
      std::count_if(changes_.begin(), end, [](const LiveChange& change) { return !change.continued(); }));
}

namespace {

// One series being bucketed: the running level, and min/max per bucket. A bucket's values are the level
// carried in from before it and the level after each change inside it.
class SeriesBuilder {
 public:
  explicit SeriesBuilder(size_t buckets) : min_(buckets, 0), max_(buckets, 0) {}

  void change(size_t bucket, uint64_t new_level) {
    carry_to(bucket);
    level_ = new_level;
    min_[bucket] = std::min(min_[bucket], level_);
    max_[bucket] = std::max(max_[bucket], level_);
  }
  uint64_t level() const { return level_; }

  std::vector<TimelineBucket> finish(int64_t bucket_ns) {
    carry_to(min_.size() - 1);
    std::vector<TimelineBucket> buckets(min_.size());
    for (size_t i = 0; i < buckets.size(); ++i) {
      buckets[i] = TimelineBucket{static_cast<int64_t>(i) * bucket_ns, min_[i], max_[i]};
    }
    return buckets;
  }

 private:
  // Buckets after the last one touched start at the carried level.
  void carry_to(size_t bucket) {
    while (next_ <= bucket) {
      min_[next_] = max_[next_] = level_;
      ++next_;
    }
  }
  std::vector<uint64_t> min_;
  std::vector<uint64_t> max_;
  uint64_t level_ = 0;
  size_t next_ = 0;  // the first bucket not yet started
};

}  // namespace

Timeline build_timeline(const ChangeLog& log, int64_t origin, int64_t end_ns) {
  Timeline timeline;
  const auto& changes = log.changes();
  if (changes.empty()) return timeline;

  int64_t end = std::max<int64_t>(end_ns, 0);
  for (const LiveChange& change : changes) end = std::max(end, relative_to(origin, change.time_ns));
  // [0, end] holds end + 1 nanoseconds; uint64 so that end = INT64_MAX (a damaged trace) cannot overflow.
  const uint64_t span = static_cast<uint64_t>(end) + 1;
  // No more buckets than changes (a short trace needs no 1000 points), but at least kMinTimelineBuckets.
  const uint64_t target = std::clamp<uint64_t>(changes.size(), kMinTimelineBuckets, kMaxTimelineBuckets);
  const uint64_t width = std::max<uint64_t>(1, (span + target - 1) / target);
  const size_t count = static_cast<size_t>((span + width - 1) / width);
  timeline.bucket_ns = static_cast<int64_t>(width);
  auto bucket_of = [&](int64_t absolute) {
    const int64_t t = relative_to(origin, absolute);
    if (t <= 0) return size_t{0};
    return std::min(count - 1, static_cast<size_t>(static_cast<uint64_t>(t) / width));
  };

  // Series by device then kind; slots map to them once.
  std::map<std::pair<int64_t, schema::MemoryKind>, size_t> series_index;
  for (const ChangeSlot& slot : log.slots()) series_index.emplace(std::make_pair(slot.device, slot.memory_kind), 0);
  size_t next = 0;
  for (auto it = series_index.begin(); it != series_index.end();) {
    if (next == kMaxTimelineSeries) {
      timeline.series_not_tracked = series_index.size() - next;
      series_index.erase(it, series_index.end());
      break;
    }
    it->second = next++;
    ++it;
  }
  constexpr size_t kUntracked = static_cast<size_t>(-1);
  std::vector<size_t> slot_series(log.slots().size(), kUntracked);
  for (size_t i = 0; i < log.slots().size(); ++i) {
    auto found = series_index.find({log.slots()[i].device, log.slots()[i].memory_kind});
    if (found != series_index.end()) slot_series[i] = found->second;
  }

  SeriesBuilder total(count);
  std::vector<SeriesBuilder> series(series_index.size(), SeriesBuilder(count));
  for (const LiveChange& change : changes) {
    const size_t bucket = bucket_of(change.time_ns);
    auto apply = [&](SeriesBuilder& builder) {
      builder.change(bucket, change.added() ? builder.level() + change.size() : builder.level() - change.size());
    };
    apply(total);
    if (slot_series[change.slot()] != kUntracked) apply(series[slot_series[change.slot()]]);
  }

  timeline.total = total.finish(timeline.bucket_ns);
  for (const auto& [key, index] : series_index) {
    timeline.series.push_back(
        TimelineSeries{key.first, key.second, series[index].finish(timeline.bucket_ns), series[index].level()});
  }
  return timeline;
}

uint32_t StackGroups::group_of(int64_t stack_id) {
  auto cached = by_stack_.find(stack_id);
  if (cached != by_stack_.end()) return cached->second;
  const std::string key = key_(load_(stack_id));
  auto [it, inserted] = keys_.try_emplace(key, static_cast<uint32_t>(keys_.size()));
  by_stack_.emplace(stack_id, it->second);
  return it->second;
}

std::vector<std::vector<GroupBytes>> snapshot_groups(const ChangeLog& log, const std::vector<SnapshotRequest>& requests,
                                                     StackGroups& groups) {
  std::vector<std::vector<GroupBytes>> results(requests.size());
  if (requests.empty()) return results;
  // Requests in position order; equal requests are answered once.
  std::vector<size_t> order(requests.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (requests[a].position != requests[b].position) return requests[a].position < requests[b].position;
    return requests[a].device < requests[b].device;
  });

  const auto& changes = log.changes();
  const auto& slots = log.slots();
  std::vector<uint64_t> bytes(slots.size(), 0);
  std::vector<uint64_t> counts(slots.size(), 0);
  // Per group scratch for one snapshot; `touched` lists the groups to reset afterwards.
  std::vector<GroupBytes> scratch;
  std::vector<uint32_t> touched;
  size_t applied = 0;
  const SnapshotRequest* previous = nullptr;
  size_t previous_index = 0;

  for (size_t index : order) {
    const SnapshotRequest& request = requests[index];
    if (previous && previous->position == request.position && previous->device == request.device) {
      results[index] = results[previous_index];
      continue;
    }
    const uint64_t position = std::min<uint64_t>(request.position, changes.size());
    for (; applied < position; ++applied) {
      const LiveChange& change = changes[applied];
      const uint64_t whole = change.continued() ? 0 : 1;  // a further part of a large change counts no allocation
      if (change.added()) {
        bytes[change.slot()] += change.size();
        counts[change.slot()] += whole;
      } else {
        bytes[change.slot()] -= change.size();
        counts[change.slot()] -= whole;
      }
    }
    for (size_t slot = 0; slot < slots.size(); ++slot) {
      if (slots[slot].device != request.device || (bytes[slot] == 0 && counts[slot] == 0)) continue;
      const uint32_t group = groups.group_of(slots[slot].stack_id);
      if (group >= scratch.size()) scratch.resize(group + 1);
      GroupBytes& entry = scratch[group];
      if (entry.stack_ids.empty()) {
        entry.group = group;
        touched.push_back(group);
      }
      entry.bytes += bytes[slot];
      entry.count += counts[slot];
      // Slots differ by kind too: one stack may appear in several.
      auto at = std::lower_bound(entry.stack_ids.begin(), entry.stack_ids.end(), slots[slot].stack_id);
      if (at == entry.stack_ids.end() || *at != slots[slot].stack_id) entry.stack_ids.insert(at, slots[slot].stack_id);
    }
    std::vector<GroupBytes>& result = results[index];
    result.reserve(touched.size());
    for (uint32_t group : touched) {
      result.push_back(std::move(scratch[group]));
      scratch[group] = GroupBytes{};
    }
    touched.clear();
    previous = &request;
    previous_index = index;
  }
  return results;
}

std::vector<StackBytes> top_stack_bytes(const std::vector<GroupBytes>& snapshot, size_t top, StackGroups& groups) {
  std::vector<const GroupBytes*> sorted;
  sorted.reserve(snapshot.size());
  for (const GroupBytes& entry : snapshot) sorted.push_back(&entry);
  const size_t keep = std::min(top, sorted.size());
  std::partial_sort(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(keep), sorted.end(),
                    [](const GroupBytes* a, const GroupBytes* b) {
                      if (a->bytes != b->bytes) return a->bytes > b->bytes;
                      if (a->count != b->count) return a->count > b->count;
                      return a->stack_ids.front() < b->stack_ids.front();
                    });
  std::vector<StackBytes> result;
  for (size_t i = 0; i < keep; ++i) {
    const GroupBytes& entry = *sorted[i];
    result.push_back(StackBytes{groups.load(entry.stack_ids.front()), entry.stack_ids, entry.bytes, entry.count});
  }
  return result;
}

}  // namespace gmt::analysis
