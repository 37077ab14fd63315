// Every allocation's life, alloc to free, for the exports that ship per-allocation data: PyTorch's memory_viz
// snapshot (snapshot.h), the Perfetto trace's allocation slices and the HTML page's zoomed-in views
// (allocation_slices.h). The Report (report.h) is bounded by its caps and holds no single allocation; this pass
// reads the trace's events once more and hands each life to a sink as it begins and as it ends, so that a sink keeps
// only what it needs (the last entries, the largest lives, live segments) and the memory stays bounded by what is
// live at once, never by the number of events.
//
// Which memory is which follows the AppLevel pass (heaps.h): a heap's blocks (PyTorch's tensor blocks, NVTX memory
// API regions) are what the app holds, inside the heap's segments; the CUDA-level allocations behind a segment are
// the allocator's reservation (level Backing); every other CUDA-level allocation (cudaMalloc, pools, managed, pinned
// host, VMM physical memory) is one of the app's own (level Cuda). The report's filters (--device, --since, --until,
// --min-size, --range, --pid) choose blocks and Cuda-level lives by the same rule as the report (filters.h);
// segments and backing memory are not filtered, since they only say where blocks lie (but --device leaves out other
// devices' segments).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "analysis/model/filters.h"
#include "analysis/read/trace_file.h"
#include "schema/trace_schema.h"

namespace gmt::analysis {

enum class LifeLevel : uint8_t {
  Cuda,     // a CUDA-level allocation that backs no heap: the app's own (or a library's: NCCL, cuBLAS ...)
  Backing,  // a CUDA-level allocation (or VMM physical handle) behind a heap's segment: the allocator's reservation
  Block,    // a block a heap handed out (memory kind tensor_block or heap_block)
  Segment,  // a heap's segment (SegmentAlloc .. SegmentFree)
};
const char* to_string(LifeLevel level);

inline constexpr int64_t kStillLive = -1;

struct Lifetime {
  int64_t event_id = 0;  // of the Alloc (VmmCreate, SegmentAlloc)
  int64_t alloc_ns = 0;  // relative to the process start
  int64_t free_ns = kStillLive;
  LifeLevel level = LifeLevel::Cuda;
  int64_t device = -1;
  // The address. VMM physical memory has none until it is mapped: its life begins with 0, and ends (and is live at
  // the end) with the address of its first mapping, when it was mapped.
  uint64_t address = 0;
  uint64_t size = 0;
  int64_t stack_id = 0;
  int64_t stream = 0;
  int64_t source = 0;   // schema::Source code
  uint64_t handle = 0;  // VMM handle, pool, or NVTX heap handle
  schema::MemoryKind memory_kind = schema::MemoryKind::None;
  schema::Api api = schema::Api::Unknown;

  bool live() const { return free_ns == kStillLive; }
};

class LifetimeSink {
 public:
  virtual ~LifetimeSink() = default;
  // A life begins (free_ns is kStillLive). Called in time order with on_end.
  virtual void on_begin(const Lifetime& life) = 0;
  // A life ends: `life` is what on_begin was given, with free_ns set.
  virtual void on_end(const Lifetime& life) = 0;
  // A failed allocation (AllocFailed), with the request as size; after the filters. Default: ignored.
  virtual void on_failure(const Lifetime& /*request*/) {}
};

struct LifetimeWalk {
  int64_t origin_ns = 0;    // the absolute time that relative times count from
  int64_t duration_ns = 0;  // up to the later of the last event and meta end_monotonic_ns
  uint64_t lives = 0;       // lives begun (every level)
  uint64_t unmatched_frees = 0;
  std::vector<Lifetime> live_at_end;  // lives never ended, in the order they began
};

// Reads every event once, in time order, and hands the lives to `sink`. `reset` is called before the walk and
// again when the trace's order made the walk start over (ordered_events.h): a sink must then forget what it saw.
// Throws TraceError when SQLite cannot read the trace.
LifetimeWalk walk_lifetimes(const TraceFile& trace, const EventFilters& filters, LifetimeSink& sink,
                            const std::function<void()>& reset);

}  // namespace gmt::analysis
