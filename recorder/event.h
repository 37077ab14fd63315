// The one event type that every capture path (interpose/, cupti/, nvtx/, the framework bridges of python/) hands
// to the recorder: a fixed header, which the recorder reads and completes (time, thread, stack, device), and a small
// payload whose meaning the kind decides. Fixed size and trivially copyable: hooks fill one on their stack and the
// recorder copies it into a per-thread buffer.
//
// Which payload each kind carries, and where the writer (recorder/trace_writer*.cpp) puts it:
//   call              Alloc, Free, AllocFailed, StreamCreate, StreamDestroy, Synchronize, PoolCreate, PoolDestroy,
//                     PoolTrim, VmmReserve ... VmmUnmap, VmmImport, SegmentAlloc, SegmentFree, GraphAllocNode: one
//                     events row (and alloc_failures for a failure)
//   pool_usage        PoolUsage: one pool_usage row
//   range             RangeBegin, RangeEnd: a ranges row (begun, or ended)
//   mark              Mark: one marks row
//   allocator_sample  AllocatorSample: one allocator_stats row
// A new kind of event adds one payload struct, one member of the union and one case in the writer.
#pragma once

#include <cstdint>
#include <type_traits>

#include "schema/trace_schema.h"

namespace gmt::recorder {

// cudaErrorMemoryAllocation and CUDA_ERROR_OUT_OF_MEMORY: the runtime and the driver give out-of-memory one code.
inline constexpr int32_t kOutOfMemoryError = 2;

// What every event has, whatever its kind.
struct EventHeader {
  uint64_t time_ns = 0;   // CLOCK_MONOTONIC
  uint32_t stack_id = 0;  // 0 = no stack
  uint32_t thread_id = 0;
  int16_t device = -1;
  schema::EventKind kind = schema::EventKind::Alloc;
  schema::Api api = schema::Api::Unknown;
  schema::Source source = schema::Source::RuntimeHook;
  schema::MemoryKind memory_kind = schema::MemoryKind::None;
};

// A CUDA call: an allocation, free, failed allocation, stream, pool or VMM event (schema::EventKind says which
// fields it uses). Its row in `events` has every field; a failure also has its alloc_failures row.
struct CallPayload {
  uint64_t address = 0;  // the allocation; for pool events the pool; for VMM events the virtual range
  uint64_t size = 0;     // Alloc: bytes granted; AllocFailed: bytes requested; PoolTrim: bytes to keep
  uint64_t stream = 0;
  uint64_t handle = 0;   // VMM physical handle, or the pool of a pool allocation
  uint64_t context = 0;  // CUcontext, 0 when unknown
  int32_t error = 0;     // AllocFailed: the cudaError_t or CUresult
  // AllocFailed after an out-of-memory error: what the device said was free and in all right after it.
  bool has_memory_info = false;
  uint64_t device_free = 0;
  uint64_t device_total = 0;
};

// A sample of a stream-ordered pool (recorder/pool_sampler.h).
struct PoolUsagePayload {
  uint64_t pool;
  uint64_t reserved_bytes;  // CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT
  uint64_t used_bytes;      // CU_MEMPOOL_ATTR_USED_MEM_CURRENT
};

// An NVTX range of the application, begun or ended (nvtx/handlers.cpp). The header's time and thread are the
// call's: for RangeEnd they become ranges.end_ns and ranges.end_thread_id.
struct RangePayload {
  // RangeBegin: ranges.id of the new row. RangeEnd: ranges.id of a push/pop range, or 0 for a start/end range,
  // whose row is then found by app_range_id.
  uint64_t row_id;
  uint64_t app_range_id;  // the nvtxRangeId_t of a start/end range (0 for push/pop)
  uint32_t name_id;       // RangeBegin: strings.id of its message, 0 = none
  uint32_t domain_id;     // RangeBegin: strings.id of its domain's name, 0 = the default domain
  int32_t depth;          // RangeBegin: push/pop nesting depth in its domain (0-based); -1 for a start/end range
};

// An NVTX marker of the application.
struct MarkPayload {
  uint32_t name_id;  // as RangePayload
  uint32_t domain_id;
};

// A sample of a framework allocator's own statistics (recorder/allocator_samples.h). The optional figures are
// negative when the allocator has none (stored as NULL).
struct AllocatorSamplePayload {
  uint64_t in_use_bytes;
  uint64_t reserved_bytes;
  int64_t inactive_split_bytes;
  int64_t alloc_retries;
  int64_t ooms;
  int64_t request_bytes;  // the failed request (trigger Oom)
  schema::FrameworkAllocator allocator;
  schema::SampleTrigger trigger;
};

struct EventRecord : EventHeader {
  union {
    CallPayload call{};  // zeroes the whole payload
    PoolUsagePayload pool_usage;
    RangePayload range;
    MarkPayload mark;
    AllocatorSamplePayload allocator_sample;
  };
};

static_assert(std::is_trivially_copyable_v<EventRecord>);
static_assert(sizeof(EventHeader) == 24 && sizeof(CallPayload) == 64);
// As before the payloads were typed: the largest payload (a call) fills the rest.
static_assert(sizeof(EventRecord) <= 88, "keep events small: buffers hold thousands of them");

}  // namespace gmt::recorder
