// Live memory bookkeeping for the model's one pass over the events: running live bytes with their peaks, and
// the VMM state machine (physical handles and their mappings). Internal to analysis/.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "analysis/model/report.h"
#include "schema/trace_schema.h"

namespace gmt::analysis {

using schema::Api;
using schema::EventKind;
using schema::MemoryKind;

struct LiveAllocation {
  uint64_t size = 0;
  int64_t stack_id = 0;
  MemoryKind memory_kind = MemoryKind::None;
  int64_t device = -1;
  int64_t time_ns = 0;  // absolute
  Api api = Api::Unknown;
  uint32_t attribution = 0;  // BreakdownTracker slot (thread, stream, stack): breakdown.h
  int64_t event_id = 0;      // the Alloc (or VmmCreate): which CUDA-level allocations back a heap (heaps.h)
  // A tensor block made on another thread while a backward() call ran (LeakGroup::backward_stack_id): the caller's
  // stack id, kBackwardCallerUnknown when several calls ran, 0 when none.
  int64_t backward_stack_id = 0;
};

// Receives every change of live bytes of a counted kind, in event order: the analysis over time
// (over_time.h) listens here. `address` is the allocation's address, 0 for VMM physical memory (a handle).
class LiveObserver {
 public:
  virtual ~LiveObserver() = default;
  virtual void on_live_change(const LiveAllocation& allocation, uint64_t address, bool added, int64_t time_ns) = 0;
};

// Running live bytes and their peaks. Unsigned arithmetic wraps instead of overflowing, so absurd sizes in a
// damaged trace give absurd numbers, never undefined behaviour; adds and subtracts of the same sizes still
// cancel exactly.
class LiveBytes {
 public:
  void set_observer(LiveObserver* observer) { observer_ = observer; }

  void add(const LiveAllocation& allocation, uint64_t address, int64_t time_ns) {
    const MemoryKind kind = allocation.memory_kind;
    const uint64_t size = allocation.size;
    uint64_t* of_kind = by_kind_.find(kind);
    if (!of_kind) return;  // not a counted kind: see kCountedKinds
    *of_kind += size;
    total_ += size;
    if (*of_kind > *peak_by_kind_.find(kind)) {
      *peak_by_kind_.find(kind) = *of_kind;
      *peak_time_by_kind_.find(kind) = time_ns;
    }
    if (total_ > peak_) {
      peak_ = total_;
      peak_time_ = time_ns;
    }
    if (observer_) observer_->on_live_change(allocation, address, true, time_ns);
  }
  void remove(const LiveAllocation& allocation, uint64_t address, int64_t time_ns) {
    uint64_t* of_kind = by_kind_.find(allocation.memory_kind);
    if (!of_kind) return;
    *of_kind -= allocation.size;
    total_ -= allocation.size;
    if (observer_) observer_->on_live_change(allocation, address, false, time_ns);
  }

  uint64_t peak() const { return peak_; }
  int64_t peak_time() const { return peak_time_; }
  const PerKind<uint64_t>& peak_by_kind() const { return peak_by_kind_; }
  const PerKind<int64_t>& peak_time_by_kind() const { return peak_time_by_kind_; }

 private:
  uint64_t total_ = 0;
  PerKind<uint64_t> by_kind_;
  uint64_t peak_ = 0;
  int64_t peak_time_ = 0;
  PerKind<uint64_t> peak_by_kind_;
  PerKind<int64_t> peak_time_by_kind_;
  LiveObserver* observer_ = nullptr;
};

// Physical memory from cuMemCreate is live from its creation until it is released *and* no mapping of it is
// left: the driver frees it only then. Created/freed counts go to the totals like plain allocations.
class VmmState {
 public:
  // `created` is the event as an allocation: its time is the event's, also for releases and unmaps.
  void apply(EventKind kind, uint64_t handle, uint64_t address, const LiveAllocation& created, LiveBytes& live_bytes,
             Totals& totals) {
    switch (kind) {
      case EventKind::VmmCreate: {
        ++totals.allocations;
        totals.allocated_bytes += created.size;
        auto [it, inserted] = physical_.try_emplace(handle, Physical{created, 0, false});
        if (!inserted) {  // a handle value reused without its release being seen
          ++totals.inconsistencies;
          live_bytes.remove(it->second.allocation, 0, created.time_ns);
          it->second = Physical{created, 0, false};
        }
        live_bytes.add(created, 0, created.time_ns);
        break;
      }
      case EventKind::VmmRelease: {
        auto it = physical_.find(handle);
        if (it == physical_.end()) {
          ++totals.unmatched_frees;
          break;
        }
        it->second.released = true;
        if (it->second.mappings == 0) free_physical(it, created.time_ns, live_bytes, totals);
        break;
      }
      case EventKind::VmmMap: {
        auto it = physical_.find(handle);
        if (it == physical_.end()) {
          ++totals.inconsistencies;  // a mapping of memory whose creation was not recorded
          break;
        }
        ++it->second.mappings;
        mappings_[address] = handle;
        break;
      }
      case EventKind::VmmUnmap: {
        auto mapping = mappings_.find(address);
        if (mapping == mappings_.end()) break;  // unmapping a range we never saw mapped
        auto it = physical_.find(mapping->second);
        mappings_.erase(mapping);
        if (it == physical_.end()) break;
        if (it->second.mappings > 0) --it->second.mappings;
        if (it->second.released && it->second.mappings == 0) free_physical(it, created.time_ns, live_bytes, totals);
        break;
      }
      default: break;
    }
  }

  // Physical memory still held, as live allocations for the leak grouping. Keys are made distinct from
  // addresses (handles are small numbers or pointers of another space) by the top bit.
  void move_live_into(std::unordered_map<uint64_t, LiveAllocation>& live) {
    for (auto& [handle, p] : physical_) live.emplace(handle | (uint64_t{1} << 63), p.allocation);
    physical_.clear();
  }

 private:
  struct Physical {
    LiveAllocation allocation;
    uint64_t mappings = 0;
    bool released = false;
  };
  using PhysicalMap = std::unordered_map<uint64_t, Physical>;

  void free_physical(PhysicalMap::iterator it, int64_t time_ns, LiveBytes& live_bytes, Totals& totals) {
    ++totals.frees;
    live_bytes.remove(it->second.allocation, 0, time_ns);
    physical_.erase(it);
  }

  PhysicalMap physical_;
  std::unordered_map<uint64_t, uint64_t> mappings_;  // mapped address -> physical handle
};

}  // namespace gmt::analysis
