#include "analysis/model/viewer_data.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

namespace gmt::analysis {
namespace {

bool counted(const Lifetime& life) { return life.level == LifeLevel::Cuda || life.level == LifeLevel::Block; }

// Live bytes per (device, stack) as changes per bucket: the level at a bucket's end is the sum up to it.
class LayerTracker {
 public:
  explicit LayerTracker(int64_t bucket_ns) : bucket_ns_(bucket_ns) {}

  void change(const Lifetime& life, int64_t time_ns, int64_t delta) {
    std::vector<int64_t>& changes = changes_[life.device][life.stack_id];
    if (changes.empty()) changes.assign(kLayerBuckets, 0);
    changes[bucket(time_ns)] += delta;
  }

  std::vector<StackLayers> finish() const {
    std::vector<StackLayers> out;
    for (const auto& [device, stacks] : changes_) {
      // Each stack's level per bucket and its highest level.
      std::vector<std::pair<uint64_t, int64_t>> highest;  // (bytes, stack id)
      std::map<int64_t, std::vector<uint64_t>> levels;
      for (const auto& [stack, changes] : stacks) {
        std::vector<uint64_t>& level = levels[stack];
        level.resize(kLayerBuckets);
        int64_t running = 0;
        uint64_t top = 0;
        for (size_t b = 0; b < kLayerBuckets; ++b) {
          running += changes[b];
          level[b] = static_cast<uint64_t>(std::max<int64_t>(0, running));
          top = std::max(top, level[b]);
        }
        highest.emplace_back(top, stack);
      }
      std::sort(highest.begin(), highest.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
      });
      StackLayers layers;
      layers.device = device;
      layers.other.assign(kLayerBuckets, 0);
      for (size_t i = 0; i < highest.size(); ++i) {
        const std::vector<uint64_t>& level = levels[highest[i].second];
        if (i < kLayerStacks && highest[i].first > 0) {
          layers.stack_ids.push_back(highest[i].second);
          layers.bytes.push_back(level);
        } else {
          for (size_t b = 0; b < kLayerBuckets; ++b) layers.other[b] += level[b];
        }
      }
      out.push_back(std::move(layers));
    }
    return out;
  }

 private:
  size_t bucket(int64_t time_ns) const {
    return std::min(kLayerBuckets - 1, static_cast<size_t>(std::max<int64_t>(0, time_ns) / bucket_ns_));
  }
  int64_t bucket_ns_;
  std::map<int64_t, std::map<int64_t, std::vector<int64_t>>> changes_;
};

// Heaps' live segments and blocks, and their layout at each chosen moment.
class HeapMoments {
 public:
  explicit HeapMoments(std::vector<HeapMoment> moments) : moments_(std::move(moments)) {}

  // Before a change at `time_ns`: the moments before it see the heaps as they are.
  void advance(int64_t time_ns) {
    while (next_ < moments_.size() && moments_[next_].time_ns < time_ns) take(moments_[next_++]);
  }
  void begin(const Lifetime& life) {
    if (life.level == LifeLevel::Segment) segments_[{life.device, life.address}] = life;
    if (life.level == LifeLevel::Block) blocks_[{life.device, life.address}] = life;
  }
  void end(const Lifetime& life) {
    if (life.level == LifeLevel::Segment) segments_.erase({life.device, life.address});
    if (life.level == LifeLevel::Block) blocks_.erase({life.device, life.address});
  }
  std::vector<HeapMoment> finish() {
    advance(INT64_MAX);
    return std::move(moments_);
  }
  bool any_segment() const { return seen_segment_; }
  void saw_segment() { seen_segment_ = true; }

 private:
  void take(HeapMoment& moment) {
    uint64_t blocks = 0;
    std::vector<Lifetime> lives;
    for (const auto& [key, life] : segments_) lives.push_back(life);
    for (const Lifetime& segment_life : join_mapped_parts(std::move(lives))) {
      SnapshotSegment segment;
      segment.device = segment_life.device;
      segment.address = segment_life.address;
      segment.total_size = segment_life.size;
      segment.stream = segment_life.stream;
      segment.source = segment_life.source;
      segment.memory_kind = segment_life.memory_kind;
      segment.expandable = segment_life.api == schema::Api::torchSegmentMap;
      segment.segment_type = segment_life.source != static_cast<int64_t>(schema::Source::TorchAllocator)
                                 ? "NVTX memory heap"
                             : segment.expandable ? "PyTorch expandable segment"
                                                  : "PyTorch segment";
      std::vector<SnapshotBlock> live;
      const std::pair<int64_t, uint64_t> key{segment.device, segment.address};
      for (auto it = blocks_.lower_bound(key); it != blocks_.end() && it->first.first == segment.device &&
                                               it->first.second < segment.address + segment.total_size;
           ++it) {
        if (blocks >= kMaxMomentBlocks) {
          ++moment.blocks_left_out;
          continue;
        }
        ++blocks;
        live.push_back({it->second.address, it->second.size, true, it->second.stack_id});
      }
      fill_holes(segment, std::move(live));
      moment.segments.push_back(std::move(segment));
    }
  }

  std::vector<HeapMoment> moments_;  // by time
  size_t next_ = 0;
  std::map<std::pair<int64_t, uint64_t>, Lifetime> segments_;
  std::map<std::pair<int64_t, uint64_t>, Lifetime> blocks_;
  bool seen_segment_ = false;
};

// The moments the segment map offers: each device's peak (of what the app held, where heaps were recorded), the
// first failed allocations, the end.
std::vector<HeapMoment> chosen_moments(const Report& report) {
  std::vector<HeapMoment> moments;
  for (const DevicePeak& peak : report.peaks) {
    if (peak.device < 0) continue;
    HeapMoment moment;
    moment.label = "peak of device " + std::to_string(peak.device);
    moment.time_ns = peak.held_bytes ? peak.held_time_ns : peak.time_ns;
    moments.push_back(std::move(moment));
  }
  for (size_t i = 0; i < report.failures.size() && moments.size() + 1 < kMaxHeapMoments; ++i) {
    HeapMoment moment;
    moment.label = "failed allocation " + std::to_string(i + 1);
    moment.time_ns = report.failures[i].time_ns;
    moments.push_back(std::move(moment));
  }
  HeapMoment end;
  end.label = "end";
  end.time_ns = report.trace.duration_ns;
  moments.push_back(std::move(end));
  std::stable_sort(moments.begin(), moments.end(),
                   [](const HeapMoment& a, const HeapMoment& b) { return a.time_ns < b.time_ns; });
  return moments;
}

class ViewerSink : public LifetimeSink {
 public:
  ViewerSink(ViewerData& data, const Report& report, const SliceLimits& limits)
      : slices_(data.slices, report.trace.duration_ns, limits),
        layers_(data.bucket_ns),
        moments_(chosen_moments(report)) {}

  void on_begin(const Lifetime& life) override {
    slices_.on_begin(life);
    moments_.advance(life.alloc_ns);
    moments_.begin(life);
    if (life.level == LifeLevel::Segment) moments_.saw_segment();
    if (!counted(life)) return;
    layers_.change(life, life.alloc_ns, static_cast<int64_t>(life.size));
    StackTotal& total = totals_[life.stack_id];
    total.stack_id = life.stack_id;
    total.bytes += life.size;
    ++total.allocations;
  }
  void on_end(const Lifetime& life) override {
    slices_.on_end(life);
    moments_.advance(life.free_ns);
    moments_.end(life);
    if (counted(life)) layers_.change(life, life.free_ns, -static_cast<int64_t>(life.size));
  }

  void finish(ViewerData& data, const LifetimeWalk& walk, const TraceFile& trace) {
    slices_.finish(walk, trace);
    data.layers = layers_.finish();
    std::vector<StackTotal> totals;
    for (const auto& [stack, total] : totals_) totals.push_back(total);
    std::sort(totals.begin(), totals.end(), [](const StackTotal& a, const StackTotal& b) {
      return a.bytes != b.bytes ? a.bytes > b.bytes : a.stack_id < b.stack_id;
    });
    for (size_t i = kMaxAllocatedStacks; i < totals.size(); ++i) {
      data.allocated_other.lives += totals[i].allocations;
      data.allocated_other.bytes += totals[i].bytes;
    }
    if (totals.size() > kMaxAllocatedStacks) totals.resize(kMaxAllocatedStacks);
    data.allocated_by_stack = std::move(totals);
    std::vector<HeapMoment> moments = moments_.finish();
    if (moments_.any_segment()) data.heap_moments = std::move(moments);
  }

 private:
  SliceCollector slices_;
  LayerTracker layers_;
  HeapMoments moments_;
  std::unordered_map<int64_t, StackTotal> totals_;
};

}  // namespace

ViewerData collect_viewer_data(const TraceFile& trace, const EventFilters& filters, const Report& report,
                               const SliceLimits& limits) {
  ViewerData data;
  std::optional<ViewerSink> sink;
  struct Forward : LifetimeSink {
    std::optional<ViewerSink>* to = nullptr;
    void on_begin(const Lifetime& life) override { (*to)->on_begin(life); }
    void on_end(const Lifetime& life) override { (*to)->on_end(life); }
  } forward;
  forward.to = &sink;
  const int64_t duration_ns = std::max<int64_t>(1, report.trace.duration_ns);
  const LifetimeWalk walk = walk_lifetimes(trace, filters, forward, [&] {
    data = ViewerData{};
    data.bucket_ns = std::max<int64_t>(1, (duration_ns + kLayerBuckets - 1) / static_cast<int64_t>(kLayerBuckets));
    sink.emplace(data, report, limits);
  });
  sink->finish(data, walk, trace);

  StackLoader loader(trace);
  auto load = [&](int64_t id) {
    if (id != 0 && !data.stacks.count(id)) data.stacks.emplace(id, loader.load(id));
  };
  for (const StackLayers& layers : data.layers) {
    for (int64_t id : layers.stack_ids) load(id);
  }
  for (const StackTotal& total : data.allocated_by_stack) load(total.stack_id);
  for (const HeapMoment& moment : data.heap_moments) {
    for (const SnapshotSegment& segment : moment.segments) {
      for (const SnapshotBlock& block : segment.blocks) load(block.stack_id);
    }
  }
  return data;
}

}  // namespace gmt::analysis
