// A framework allocator's own statistics (PyTorch's caching allocator, CuPy's pool, JAX/XLA), handed in from
// Python by the in-process package (python/gpumemtrace_inprocess/allocator_stats.py) through two exported C
// functions, and the count of NVTX ranges at nesting depth 0 that ended, which lets that sampler take a sample
// at the end of each step. The sample travels as one EventRecord (AllocatorSamplePayload, recorder/event.h) through
// the recorder's buffers; the writer thread turns it into an allocator_stats row (schema v6). Nothing here touches
// SQLite or takes a lock beyond the recorder's own.
#pragma once

#include <cstdint>

namespace gmt::recorder {

// Called by the NVTX handlers when a push/pop range at nesting depth 0 ends: one atomic increment, and a
// futex wake only while the sampler waits for it.
void note_top_level_range_end();

}  // namespace gmt::recorder

// Exported (interpose/exports.map), called through ctypes.
extern "C" {
// Records one sample. allocator: schema::FrameworkAllocator; trigger: schema::SampleTrigger; a negative
// inactive_split, retries, ooms or request means "no such figure" (NULL). Returns 0 when recorded, -1 when
// the arguments are out of range (nothing recorded), 1 when this thread is inside a hook (nothing recorded).
int gmt_record_allocator_sample(int device, int allocator, int trigger, uint64_t in_use, uint64_t reserved,
                                int64_t inactive_split, int64_t retries, int64_t ooms, int64_t request);
// NVTX push/pop ranges at nesting depth 0 that ended so far in this process (every thread, every domain).
uint64_t gmt_top_level_range_ends(void);
// Blocks until gmt_top_level_range_ends() differs from `seen` or `timeout_ms` passed, and returns it.
// Called without the GIL (ctypes releases it), so a waiting sampler costs the app nothing.
uint64_t gmt_wait_top_level_range_end(uint64_t seen, int timeout_ms);
}
