// The one event type that every capture path (interpose/, later cupti/) hands to the recorder.
// Fixed size and trivially copyable: hooks fill one on their stack and the recorder copies it into a buffer.
#pragma once

#include <cstdint>
#include <type_traits>

#include "schema/trace_schema.h"

namespace gmt::recorder {

struct EventRecord {
  uint64_t time_ns = 0;  // CLOCK_MONOTONIC
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t stream = 0;
  uint64_t handle = 0;   // VMM physical handle, or the pool of a pool allocation
  uint64_t context = 0;  // CUcontext, 0 when unknown
  uint64_t device_free = 0;   // AllocFailed only, valid when has_memory_info
  uint64_t device_total = 0;  // AllocFailed only, valid when has_memory_info
  uint32_t stack_id = 0;      // 0 = no stack
  uint32_t thread_id = 0;
  int32_t error = 0;
  int16_t device = -1;
  schema::EventKind kind = schema::EventKind::Alloc;
  schema::Api api = schema::Api::Unknown;
  schema::Source source = schema::Source::RuntimeHook;
  schema::MemoryKind memory_kind = schema::MemoryKind::None;
  bool has_memory_info = false;
};

static_assert(std::is_trivially_copyable_v<EventRecord>);
static_assert(sizeof(EventRecord) <= 88, "keep events small: buffers hold thousands of them");

}  // namespace gmt::recorder
