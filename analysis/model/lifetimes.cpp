#include "analysis/model/lifetimes.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "analysis/model/heaps.h"
#include "analysis/model/ranges.h"
#include "analysis/read/events.h"
#include "analysis/read/trace_info.h"

namespace gmt::analysis {

const char* to_string(LifeLevel level) {
  switch (level) {
    case LifeLevel::Cuda: return "cuda";
    case LifeLevel::Backing: return "backing";
    case LifeLevel::Block: return "block";
    case LifeLevel::Segment: return "segment";
  }
  return "cuda";
}

namespace {

using schema::EventKind;
using schema::MemoryKind;

constexpr int64_t code(EventKind kind) { return static_cast<int64_t>(kind); }

// Runs `pass` over `set` in time order: from the recording's order with growing windows, then sorted by SQLite
// (analyze.cpp does the same for the report's passes). `restart` is called before every attempt.
template <typename Pass>
void for_each_event(const TraceFile& trace, EventSet set, const std::function<void()>& restart, Pass&& pass) {
  auto attempt = [&](EventOrder order, size_t window) {
    restart();
    EventReader reader(trace, set, order, window);
    while (reader.step()) pass(reader.row());
  };
  if (lenient_meta_int(trace, schema::meta::kEventsTimeOrdered).value_or(0) == 1) {
    try {
      return attempt(EventOrder::RecordingWindow, kSmallEventWindow);
    } catch (const EventsOutOfOrder&) {
    }
  }
  for (size_t window : kEventWindows) {
    try {
      return attempt(EventOrder::RecordingWindow, window);
    } catch (const EventsOutOfOrder&) {
    }
  }
  attempt(EventOrder::SortedBySqlite, 1);
}

uint64_t size_of(const EventRow& e) { return e.size > 0 ? static_cast<uint64_t>(e.size) : 0; }

// The walk's state: the live lives of each level, keyed as their frees find them.
class Walker {
 public:
  Walker(const TraceFile& trace, const EventFilters& filters, std::optional<int64_t> pid, const HeapBacking* backing,
         LifetimeSink& sink, int64_t origin)
      : ranges_(trace, filters, pid),
        filter_(trace, filters, pid, filters.range ? &ranges_ : nullptr),
        only_device_(filters.device),
        backing_(backing),
        sink_(sink),
        origin_(origin) {}

  void on_event(const EventRow& e) {
    last_time_ = std::max(last_time_, e.time_ns);
    ranges_.advance(e.time_ns);
    const bool heap = is_heap_source(e.source);
    const int64_t kind = e.kind;
    if (heap && (kind == code(EventKind::SegmentAlloc) || kind == code(EventKind::SegmentFree))) {
      if (!only_device_ || e.device == *only_device_) on_segment(e, kind == code(EventKind::SegmentAlloc));
      return;
    }
    if (!heap && on_backing(e)) return;
    const bool imported_open = kind == code(EventKind::Alloc) && e.memory_kind == MemoryKind::IpcImported;
    if (filter_.active() &&
        !filter_.accept(kind, e.time_ns, e.thread_id, e.device, e.address, e.size, e.handle, imported_open)) {
      return;
    }
    if (imported_open) {  // the exporting process's memory, never this one's
      imported_.insert(e.address);
    } else if (kind == code(EventKind::Alloc)) {
      if (e.size < 0 || e.address == 0) return;  // counted as inconsistent (or as nothing) by the report
      begin(heap ? blocks_ : cuda_, key(heap, e.source, e.address), e, heap ? LifeLevel::Block : LifeLevel::Cuda);
    } else if (kind == code(EventKind::Free)) {
      if (e.address == 0) return;
      if (imported_.erase(e.address) > 0 || e.memory_kind == MemoryKind::IpcImported) return;
      if (!end(heap ? blocks_ : cuda_, key(heap, e.source, e.address), e.time_ns)) ++walk_.unmatched_frees;
    } else if (kind == code(EventKind::AllocFailed)) {
      sink_.on_failure(life_of(e, heap ? LifeLevel::Block : LifeLevel::Cuda));
    } else if (kind == code(EventKind::VmmCreate)) {
      Lifetime& life = begin(vmm_, e.handle, e, LifeLevel::Cuda);
      life.address = 0;
    } else if (kind == code(EventKind::VmmMap)) {
      auto it = vmm_.find(e.handle);
      if (it != vmm_.end() && it->second.address == 0) it->second.address = e.address;
    } else if (kind == code(EventKind::VmmRelease)) {
      if (!end(vmm_, e.handle, e.time_ns)) ++walk_.unmatched_frees;
    }
  }

  LifetimeWalk finish(const TraceFile& trace) {
    const int64_t end_abs = std::max(last_time_, lenient_meta_int(trace, schema::meta::kEndMonotonicNs).value_or(0));
    walk_.origin_ns = origin_;
    walk_.duration_ns = std::max<int64_t>(0, end_abs - origin_);
    std::vector<Lifetime>& live = walk_.live_at_end;
    for (auto* lives : {&cuda_, &vmm_, &blocks_, &segments_, &backing_lives_}) {
      for (auto& [unused, life] : *lives) live.push_back(life);
    }
    std::sort(live.begin(), live.end(), [](const Lifetime& a, const Lifetime& b) { return a.event_id < b.event_id; });
    return std::move(walk_);
  }

 private:
  using Lives = std::unordered_map<uint64_t, Lifetime>;

  // Blocks of two heaps may start at one address (nested NVTX heaps); the key keeps them apart.
  static uint64_t key(bool heap, int64_t source, uint64_t address) {
    return heap ? address ^ (static_cast<uint64_t>(source) << 60) : address;
  }

  Lifetime life_of(const EventRow& e, LifeLevel level) const {
    Lifetime life;
    life.event_id = e.id;
    life.alloc_ns = e.time_ns - origin_;
    life.level = level;
    life.device = e.device;
    life.address = e.address;
    life.size = size_of(e);
    life.stack_id = e.stack_id;
    life.stream = e.stream;
    life.source = e.source;
    life.handle = e.handle;
    life.memory_kind = e.memory_kind;
    life.api = e.api;
    return life;
  }

  Lifetime& begin(Lives& lives, uint64_t key, const EventRow& e, LifeLevel level) {
    auto [it, inserted] = lives.try_emplace(key);
    if (!inserted) {  // its free was never recorded: it ends where the address is handed out again
      ++walk_.unmatched_frees;
      it->second.free_ns = e.time_ns - origin_;
      sink_.on_end(it->second);
    }
    it->second = life_of(e, level);
    ++walk_.lives;
    sink_.on_begin(it->second);
    return it->second;
  }

  bool end(Lives& lives, uint64_t key, int64_t time_ns) {
    auto it = lives.find(key);
    if (it == lives.end()) return false;
    it->second.free_ns = time_ns - origin_;
    sink_.on_end(it->second);
    lives.erase(it);
    return true;
  }

  void on_segment(const EventRow& e, bool alloc) {
    const uint64_t segment_key = key(true, e.source, e.address);
    if (alloc) {
      begin(segments_, segment_key, e, LifeLevel::Segment);
    } else {
      end(segments_, segment_key, e.time_ns);  // a part unmapped from inside an expandable segment: nothing here
    }
  }

  // The CUDA-level memory behind a heap's segment: a life of level Backing, outside the filters.
  bool on_backing(const EventRow& e) {
    if (!backing_) return false;
    const int64_t kind = e.kind;
    if (kind == code(EventKind::Alloc) && backing_->backing_source(e.id) != 0) {
      begin(backing_lives_, e.address, e, LifeLevel::Backing);
      return true;
    }
    if (kind == code(EventKind::Free) && end(backing_lives_, e.address, e.time_ns)) return true;
    if (kind == code(EventKind::VmmCreate) && backing_->backing_source(e.id) != 0) {
      begin(backing_lives_, e.handle | (uint64_t{1} << 63), e, LifeLevel::Backing).address = 0;
      return true;
    }
    if (kind == code(EventKind::VmmMap)) {
      auto it = backing_lives_.find(e.handle | (uint64_t{1} << 63));
      if (it == backing_lives_.end()) return false;
      if (it->second.address == 0) it->second.address = e.address;
      return true;
    }
    if (kind == code(EventKind::VmmRelease)) return end(backing_lives_, e.handle | (uint64_t{1} << 63), e.time_ns);
    return false;
  }

  RangeTracker ranges_;
  EventFilter filter_;
  std::optional<int64_t> only_device_;  // --device: other devices' heap segments are left out too
  const HeapBacking* backing_;
  LifetimeSink& sink_;
  int64_t origin_;
  int64_t last_time_ = 0;
  LifetimeWalk walk_;
  Lives cuda_;      // by address
  Lives vmm_;       // by handle
  Lives blocks_;    // by key(source, address)
  Lives segments_;  // by key(source, address)
  Lives backing_lives_;
  std::unordered_set<uint64_t> imported_;
};

}  // namespace

LifetimeWalk walk_lifetimes(const TraceFile& trace, const EventFilters& filters, LifetimeSink& sink,
                            const std::function<void()>& reset) {
  const int64_t origin = trace_origin(trace);
  TraceInfo info;
  read_trace_info(trace, info);
  std::optional<HeapBacking> backing;
  // Only a trace with a heap's segment needs the CUDA-level pass that finds the memory behind segments.
  if (has_segment_events(trace)) {
    backing.emplace();
    HeapBacking& found = *backing;
    // The CudaLevel pass's rule (heaps.h): which CUDA-level allocations a segment overlapped in their life.
    for_each_event(
        trace, EventSet::CudaLevel, [&] { found = HeapBacking{}; },
        [&](const EventRow& e) {
          const int64_t kind = e.kind;
          if (is_heap_source(e.source)) {
            if (kind == code(EventKind::SegmentAlloc) || kind == code(EventKind::SegmentFree)) {
              found.on_segment(e.source, kind == code(EventKind::SegmentAlloc), e.address, size_of(e));
            }
          } else if (kind == code(EventKind::Alloc) && e.address != 0 && e.size >= 0 &&
                     e.memory_kind != MemoryKind::IpcImported) {
            found.on_cuda_alloc(e.id, e.address, size_of(e));
          } else if (kind == code(EventKind::Free) && e.address != 0) {
            found.on_cuda_free(e.address);
          } else if (kind == code(EventKind::VmmCreate)) {
            found.on_vmm_create(e.id, e.handle);
          } else if (kind == code(EventKind::VmmMap)) {
            found.on_vmm_map(e.address, size_of(e), e.handle);
          } else if (kind == code(EventKind::VmmUnmap)) {
            found.on_vmm_unmap(e.address);
          }
        });
  }
  std::optional<Walker> walker;
  for_each_event(
      trace, EventSet::AppLevel,
      [&] {
        reset();
        walker.emplace(trace, filters, info.pid, backing ? &*backing : nullptr, sink, origin);
      },
      [&](const EventRow& e) { walker->on_event(e); });
  return walker->finish(trace);
}

}  // namespace gmt::analysis
