// Samples of stream-ordered pools: how much memory a pool holds (reserved) against how much of it is handed
// out (used). Reserved minus used is memory the app cannot see as "allocated" but the device cannot give to
// anyone else: the pool's own fragmentation and cache. Sampled from the driver (cuMemPoolGetAttribute) after
// stream-ordered allocations and frees, at most once per 10 ms per thread, and after every trim, so the
// cost stays off most events. Driver-level backends only: the runtime-level backend has no driver to ask.
#pragma once

#include <cstdint>

namespace gmt::recorder {

// `pool` 0 means the device's current pool (cudaMallocAsync / cuMemAllocAsync / their frees).
// Call inside an active HookScope, after the call that changed the pool returned. `now`: the time of the event
// that triggers the sample (a clock read costs ~30 ns on the GPU machines, bench/query_cost); 0 reads the clock.
void sample_pool(uint64_t pool, int16_t device, bool force, uint64_t now = 0);

}  // namespace gmt::recorder
