// Stream-ordered pools' reserved bytes where they matter (docs/design.md "Stream-ordered pools"): the hook path
// samples a pool at most once per 10 ms per thread (pool_sampler.h), so a pool that grows fast can be reported with a
// reserved peak below its used peak. The writer thread therefore follows each pool's used bytes through the events
// it writes, and after each batch in which a pool reached a new used peak it reads that pool's reserved bytes once
// (cuMemPoolGetAttribute, or the runtime's cudaMemPoolGetAttribute where no driver is loaded: the simulated runtime)
// and writes the sample; an atexit handler, registered when the writer starts (after the runtime's own), samples
// every pool once more at exit, before the runtime tears its pools down. No cost on the hook path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "recorder/event.h"

namespace gmt::recorder {

class PoolPeaks {
 public:
  using Pool = std::pair<int16_t, uint64_t>;  // (device, handle); handle 0: the device's current pool

  // Each event the writer wrote, in order.
  void on_event(const EventRecord& e);
  // The pools whose used bytes reached a new peak since the last call.
  std::vector<Pool> take_new_peaks();
  // Every pool seen so far.
  std::vector<Pool> pools() const;

 private:
  struct State {
    uint64_t used = 0;
    uint64_t peak = 0;
    bool new_peak = false;
  };
  std::map<Pool, State> pools_;
  std::unordered_map<uint64_t, std::pair<Pool, uint64_t>> live_;  // address -> (pool, size)
};

// The pool's reserved and used bytes now, from the driver, else from the runtime's own pool functions (found in the
// libcudart the process loaded). `pool` 0: the device's current pool; the handle read is put in `out.pool`. False
// when neither can say. Not for the hook path (it may take the runtime's locks).
bool read_pool_usage(uint64_t pool, int16_t device, PoolUsagePayload& out);

}  // namespace gmt::recorder
