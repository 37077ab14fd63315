#include "analysis/model/snapshot.h"

#include <fmt/core.h>

#include <algorithm>
#include <iterator>
#include <tuple>

#include "schema/trace_schema.h"

namespace gmt::analysis {

const char* to_string(SnapshotAction action) {
  switch (action) {
    case SnapshotAction::SegmentAlloc: return "segment_alloc";
    case SnapshotAction::Alloc: return "alloc";
    case SnapshotAction::FreeRequested: return "free_requested";
    case SnapshotAction::FreeCompleted: return "free_completed";
    case SnapshotAction::SegmentFree: return "segment_free";
  }
  return "alloc";
}

uint64_t SnapshotSegment::allocated_bytes() const {
  uint64_t bytes = 0;
  for (const SnapshotBlock& block : blocks) bytes += block.allocated && !block.pending ? block.size : 0;
  return bytes;
}

uint64_t SnapshotSegment::active_bytes() const {
  uint64_t bytes = 0;
  for (const SnapshotBlock& block : blocks) bytes += block.allocated ? block.size : 0;
  return bytes;
}

uint64_t SnapshotSegment::requested_bytes() const {
  uint64_t bytes = 0;
  for (const SnapshotBlock& block : blocks) bytes += block.allocated ? block.requested : 0;
  return bytes;
}

namespace {

// PyTorch's caching allocator takes 2 MiB segments for its small pool (requests up to 1 MiB), larger ones otherwise.
constexpr uint64_t kSmallSegmentBytes = uint64_t{2} << 20;

class SnapshotSink : public LifetimeSink {
 public:
  explicit SnapshotSink(Snapshot& snapshot) : snapshot_(snapshot) {}

  void on_begin(const Lifetime& life) override {
    if (life.device < 0 && life.level != LifeLevel::Backing && life.level != LifeLevel::Segment) ++host_lives;
    if (!shown(life)) return;
    if (life.level != LifeLevel::Block) add(life, SnapshotAction::SegmentAlloc, life.alloc_ns);
    if (life.level != LifeLevel::Segment) add(life, SnapshotAction::Alloc, life.alloc_ns);
  }

  void on_end(const Lifetime& life) override {
    if (!shown(life)) return;
    // PyTorch records free_requested when the tensor dies and free_completed when the block is back in the cache
    // (after the streams that used it are done); a CUDA free is both at once.
    if (life.level != LifeLevel::Segment) {
      add(life, SnapshotAction::FreeRequested, life.free_ns);
      add(life, SnapshotAction::FreeCompleted, life.free_ns);
    }
    if (life.level != LifeLevel::Block) add(life, SnapshotAction::SegmentFree, life.free_ns);
  }

 private:
  // Backing memory: its heap's segment stands for it. Host memory: no device to put it on.
  static bool shown(const Lifetime& life) { return life.level != LifeLevel::Backing && life.device >= 0; }

  void add(const Lifetime& life, SnapshotAction action, int64_t time_ns) {
    DeviceHistory& history = snapshot_.devices[life.device];
    history.entries.push_back({action, life.address, life.size, life.stream, time_ns, life.stack_id});
    if (history.entries.size() > snapshot_.max_entries) {
      history.entries.pop_front();
      ++history.dropped;
    }
  }

  Snapshot& snapshot_;

 public:
  uint64_t host_lives = 0;  // the app's lives on device -1, left out
};

SnapshotSegment segment_of(const Lifetime& life, const char* type) {
  SnapshotSegment segment;
  segment.device = life.device;
  segment.address = life.address;
  segment.total_size = life.size;
  segment.stream = life.stream;
  segment.segment_type = type;
  segment.source = life.source;
  segment.memory_kind = life.memory_kind;
  segment.stack_id = life.stack_id;
  return segment;
}

// PyTorch's blocks at their real sizes when the replay reproduces the recording, else at the requested sizes with
// the reason in block_sizes_note.
void settle_block_sizes(const TraceFile& trace, const EventFilters& filters, Snapshot& snapshot) {
  if (filters.until_ns) {
    snapshot.block_sizes_note = "--until and --at show the blocks live at that moment; the replay of PyTorch's "
                                "allocator gives their sizes at the end of the trace only";
    return;
  }
  const replay::ReplayedBlockSizes real = replay::replay_block_sizes(trace, filters.device);
  if (!real.replayed) {
    if (real.has_torch) snapshot.block_sizes_note = real.why_not;
    return;
  }
  if (std::optional<std::string> why_not = use_real_block_sizes(snapshot, real.by_device)) {
    snapshot.block_sizes_note = *why_not;
    return;
  }
  snapshot.block_sizes_replayed = true;
}

}  // namespace

std::vector<Lifetime> join_mapped_parts(std::vector<Lifetime> segments) {
  std::sort(segments.begin(), segments.end(), [](const Lifetime& a, const Lifetime& b) {
    return std::tie(a.device, a.source, a.address) < std::tie(b.device, b.source, b.address);
  });
  std::vector<Lifetime> joined;
  for (const Lifetime& part : segments) {
    const bool mapped = part.api == schema::Api::torchSegmentMap;
    if (mapped && !joined.empty()) {
      Lifetime& last = joined.back();
      if (last.api == schema::Api::torchSegmentMap && last.device == part.device && last.source == part.source &&
          last.address + last.size == part.address) {
        last.size += part.size;
        continue;
      }
    }
    joined.push_back(part);
  }
  return joined;
}

void fill_holes(SnapshotSegment& segment, std::vector<SnapshotBlock> live) {
  std::sort(live.begin(), live.end(),
            [](const SnapshotBlock& a, const SnapshotBlock& b) { return a.address < b.address; });
  uint64_t cursor = segment.address;
  const uint64_t end = segment.address + segment.total_size;
  for (SnapshotBlock& block : live) {
    if (block.address < cursor) continue;  // overlaps the previous block (a damaged trace): shown once
    const uint64_t block_end = std::min(end, block.address + block.size);
    if (block.address > cursor) segment.blocks.push_back({cursor, block.address - cursor, false, 0});
    block.size = block_end - block.address;
    segment.blocks.push_back(block);
    cursor = block_end;
  }
  if (cursor < end) segment.blocks.push_back({cursor, end - cursor, false, 0});
}

std::optional<std::string> use_real_block_sizes(
    Snapshot& snapshot, const std::map<int64_t, std::unordered_map<uint64_t, replay::ReplayedBlock>>& real) {
  std::vector<std::pair<size_t, SnapshotSegment>> changed;
  for (size_t i = 0; i < snapshot.segments.size(); ++i) {
    const SnapshotSegment& segment = snapshot.segments[i];
    if (segment.source != static_cast<int64_t>(schema::Source::TorchAllocator) ||
        (segment.segment_type != "small" && segment.segment_type != "large")) {
      continue;
    }
    auto device = real.find(segment.device);
    std::vector<SnapshotBlock> live;
    uint64_t live_bytes = 0;
    for (const SnapshotBlock& block : segment.blocks) {
      if (!block.allocated) continue;
      const replay::ReplayedBlock* replayed = nullptr;
      if (device != real.end()) {
        auto it = device->second.find(block.address);
        if (it != device->second.end()) replayed = &it->second;
      }
      if (!replayed || replayed->requested != block.requested) {
        return fmt::format("the replay {} the {} B block at {:#x} on device {}",
                           replayed ? "holds another request than" : "does not hold", block.requested, block.address,
                           segment.device);
      }
      SnapshotBlock sized = block;
      sized.size = replayed->size;
      sized.pending = replayed->pending;
      if (sized.address + sized.size > segment.address + segment.total_size) {
        return fmt::format("the replay's {} B block at {:#x} on device {} reaches past its segment", sized.size,
                           sized.address, segment.device);
      }
      live_bytes += sized.size;
      live.push_back(sized);
    }
    SnapshotSegment resized = segment;
    resized.blocks.clear();
    fill_holes(resized, std::move(live));
    if (resized.active_bytes() != live_bytes) {  // fill_holes left out a block that overlaps the one before
      return fmt::format("the replay's blocks overlap in the segment at {:#x} on device {}", segment.address,
                         segment.device);
    }
    changed.emplace_back(i, std::move(resized));
  }
  for (auto& [i, segment] : changed) snapshot.segments[i] = std::move(segment);
  return std::nullopt;
}

Snapshot build_snapshot(const TraceFile& trace, const EventFilters& filters, size_t max_entries, bool replay_sizes) {
  Snapshot snapshot;
  snapshot.max_entries = std::max<size_t>(1, max_entries);
  SnapshotSink sink(snapshot);
  LifetimeWalk walk = walk_lifetimes(trace, filters, sink, [&] {
    snapshot.devices.clear();
    sink.host_lives = 0;
  });
  snapshot.duration_ns = walk.duration_ns;
  snapshot.host_lives_left_out = sink.host_lives;

  // Heap segments live at the end, by device and address, and the live blocks to place in them.
  std::map<std::pair<int64_t, uint64_t>, SnapshotSegment> heap_segments;
  std::map<std::pair<int64_t, uint64_t>, std::vector<SnapshotBlock>> blocks_of;
  std::vector<Lifetime> segment_lives;
  for (const Lifetime& life : walk.live_at_end) {
    if (life.device >= 0 && life.level == LifeLevel::Segment) segment_lives.push_back(life);
  }
  for (const Lifetime& life : join_mapped_parts(std::move(segment_lives))) {
    SnapshotSegment segment = segment_of(life, life.size <= kSmallSegmentBytes ? "small" : "large");
    segment.expandable = life.api == schema::Api::torchSegmentMap;
    heap_segments.emplace(std::make_pair(life.device, life.address), std::move(segment));
  }
  for (const Lifetime& life : walk.live_at_end) {
    if (life.device < 0) continue;
    if (life.level == LifeLevel::Cuda) {
      SnapshotSegment segment = segment_of(life, "cuda");
      segment.blocks.push_back({life.address, life.size, true, life.stack_id, life.size});
      snapshot.segments.push_back(std::move(segment));
    } else if (life.level == LifeLevel::Block) {
      // The live segment of its device that holds it: the last one starting at or below its address.
      auto it = heap_segments.upper_bound({life.device, life.address});
      if (it != heap_segments.begin()) {
        auto candidate = std::prev(it);
        const SnapshotSegment& segment = candidate->second;
        if (segment.device == life.device && life.address + life.size <= segment.address + segment.total_size) {
          blocks_of[candidate->first].push_back({life.address, life.size, true, life.stack_id, life.size});
          continue;
        }
      }
      ++snapshot.blocks_outside_segments;
      SnapshotSegment segment = segment_of(life, "unrecorded");
      segment.blocks.push_back({life.address, life.size, true, life.stack_id, life.size});
      snapshot.segments.push_back(std::move(segment));
    }
  }
  for (auto& [key, segment] : heap_segments) {
    fill_holes(segment, std::move(blocks_of[key]));
    snapshot.segments.push_back(std::move(segment));
  }
  std::sort(snapshot.segments.begin(), snapshot.segments.end(), [](const SnapshotSegment& a, const SnapshotSegment& b) {
    return std::tie(a.device, a.address) < std::tie(b.device, b.address);
  });
  for (const SnapshotSegment& segment : snapshot.segments) snapshot.devices[segment.device];
  if (replay_sizes) settle_block_sizes(trace, filters, snapshot);

  StackLoader loader(trace);
  auto load = [&](int64_t id) {
    if (id != 0 && !snapshot.stacks.count(id)) snapshot.stacks.emplace(id, loader.load(id));
  };
  for (const SnapshotSegment& segment : snapshot.segments) {
    load(segment.stack_id);
    for (const SnapshotBlock& block : segment.blocks) load(block.stack_id);
  }
  for (const auto& [device, history] : snapshot.devices) {
    for (const SnapshotEntry& entry : history.entries) load(entry.stack_id);
  }
  return snapshot;
}

}  // namespace gmt::analysis
