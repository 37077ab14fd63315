// Stream-ordered pools (docs/analysis.md "Stream-ordered pools"), internal to analysis/: the exact used bytes of
// each pool from the trace's own events, at every moment, joined with the driver's sampled reserved bytes.
//
// Which pool an allocation is in, from what the capture paths record (recorder/driver_events.cpp,
// interpose/cudart_hooks.cpp, recorder/graph_memory.cpp):
//   - cudaMallocFromPoolAsync / cuMemAllocFromPoolAsync: events.handle is the pool;
//   - cudaMallocAsync / cuMemAllocAsync: handle 0, the device's current pool (its default pool unless the app set
//     another); its pool_usage samples carry the handle the driver resolved, which no event names;
//   - graphMemAlloc (a CUDA graph launch's allocation): the device's graph memory pool (kGraphMemoryPool).
// A free ends the allocation whatever the call (cudaFreeAsync, cudaFree, a graph's free node).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/model/report.h"
#include "analysis/read/trace_file.h"
#include "schema/trace_schema.h"

namespace gmt::analysis {

// Samples per pool kept with their exact used bytes (PoolUsage::series); the extremes are computed over all.
inline constexpr size_t kMaxPoolSeries = 256;
// The key of a FromPool allocation whose pool the trace did not record (traces of the runtime hooks before they
// kept it): never a real handle's value (pointers are aligned; kGraphMemoryPool is ~0).
inline constexpr uint64_t kUnrecordedPool = ~uint64_t{0} - 1;

class PoolTracker {
 public:
  // Every successful Alloc of the pass (any api: those that are not stream-ordered are ignored) and every Free.
  void on_alloc(schema::Api api, uint64_t handle, int64_t device, uint64_t address, uint64_t size, int64_t time_ns);
  void on_free(uint64_t address, int64_t time_ns);
  // A PoolCreate event: `pool` is the app's, even when nothing was allocated from it.
  void on_pool_create(uint64_t pool, int64_t device);

  // After the pass: the pools, in order of device then handle, joined with the trace's pool_usage samples
  // (nullopt when it has neither those nor a pool allocation). `origin` is the absolute process start.
  std::optional<std::vector<PoolUsage>> finish(const TraceFile& trace, int64_t origin) const;

 private:
  // (device, pool); pool 0: the device's current pool. A created pool's device is the one its handle was first
  // seen on: the handle alone names it, whatever device was current at a later call.
  using Key = std::pair<int64_t, uint64_t>;
  struct State {
    uint64_t used = 0;
    uint64_t peak = 0;
    int64_t peak_time = 0;  // absolute
    uint64_t allocations = 0;
    uint64_t live = 0;
    std::vector<std::pair<int64_t, uint64_t>> steps;  // (absolute time, used after the change), in event order
  };
  struct Live {
    Key key;
    uint64_t size = 0;
  };
  State& state(const Key& key);

  std::map<Key, State> pools_;
  std::unordered_map<uint64_t, int64_t> created_;  // handle of a pool of the app's -> its device
  std::unordered_map<uint64_t, Live> live_;        // address -> its pool allocation
};

}  // namespace gmt::analysis
