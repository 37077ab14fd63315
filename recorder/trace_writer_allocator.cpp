// The writer's part of the framework allocators' statistics (schema v6): one allocator_stats row per
// AllocatorSample event (recorder/event.h: AllocatorSamplePayload).
#include "recorder/trace_writer.h"

namespace gmt::recorder {

bool TraceWriter::write_allocator_sample(const EventRecord& e) {
  sqlite3_stmt* s = insert_allocator_sample_;
  const AllocatorSamplePayload& sample = e.allocator_sample;
  auto bind_optional = [s](int index, int64_t value) {
    if (value >= 0) sqlite3_bind_int64(s, index, value);
    // else NULL: step_and_reset clears the bindings
  };
  sqlite3_bind_int64(s, 1, static_cast<sqlite3_int64>(e.time_ns));
  sqlite3_bind_int(s, 2, e.device);
  sqlite3_bind_int(s, 3, static_cast<int>(sample.allocator));
  sqlite3_bind_int(s, 4, static_cast<int>(sample.trigger));
  sqlite3_bind_int64(s, 5, static_cast<sqlite3_int64>(sample.in_use_bytes));
  sqlite3_bind_int64(s, 6, static_cast<sqlite3_int64>(sample.reserved_bytes));
  bind_optional(7, sample.inactive_split_bytes);
  bind_optional(8, sample.alloc_retries);
  bind_optional(9, sample.ooms);
  bind_optional(10, sample.request_bytes);
  return step_and_reset(s);
}

}  // namespace gmt::recorder
