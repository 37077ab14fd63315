// One failed request, one failure (docs/analysis.md "Failed allocations"): a framework allocator's request that failed
// (PyTorch's OutOfMemoryError, a torchBlockAlloc AllocFailed event) is told at the level the program asked at, and
// the CUDA-level allocations that failed inside it are its evidence, not failures of their own. Internal to
// analysis/.
//
// What the trace holds for one failed request of PyTorch's caching allocator (DeviceCachingAllocator::malloc,
// c10/cuda/CUDACachingAllocator.cpp), all on the requesting thread while the allocator's lock is held: no cached
// block fits, so alloc_block calls cudaMalloc (or cuMemCreate for an expandable segment), which fails; then
// release_available_cached_blocks gives back cached segments (SEGMENT_FREE and cudaFree) and alloc_block tries again;
// then release_cached_blocks gives back every unsplit cached segment and alloc_block tries a last time; when that
// fails too, cudaMemGetInfo, and the OOM trace entry (our block-level AllocFailed). Any of the three attempts may be
// missing (nothing to release, or the memory fraction refused it before cudaMalloc).
#pragma once

#include "analysis/model/report.h"

namespace gmt::analysis {

// Moves each CUDA-level failure made inside a framework's failed request into that request's `attempts`: the same
// thread and device, after the event that ended the thread's previous request of the heap
// (AllocFailure::previous_request_event_id) and before the request's failure; where both stacks carry Python frames,
// the same Python frames (the thread was inside the one Python call). Totals::failed_allocations then counts each
// request once, Totals::failed_attempts_in_requests the attempts. `failures` are in time order.
void link_failed_attempts(Report& report);

}  // namespace gmt::analysis
