// The writer's part of the framework allocators' statistics (schema v6): one allocator_stats row per
// AllocatorSample event (the field mapping is in recorder/allocator_samples.h).
#include "recorder/allocator_samples.h"
#include "recorder/trace_writer.h"

namespace gmt::recorder {

bool TraceWriter::write_allocator_sample(const EventRecord& e) {
  sqlite3_stmt* s = insert_allocator_sample_;
  const int32_t present = (e.error >> 16) & 0xF;
  auto bind_optional = [s, present](int index, int32_t bit, uint64_t value) {
    if (present & bit) sqlite3_bind_int64(s, index, static_cast<sqlite3_int64>(value));
    // else NULL: step_and_reset clears the bindings
  };
  sqlite3_bind_int64(s, 1, static_cast<sqlite3_int64>(e.time_ns));
  sqlite3_bind_int(s, 2, e.device);
  sqlite3_bind_int(s, 3, e.error & 0xFF);
  sqlite3_bind_int(s, 4, (e.error >> 8) & 0xFF);
  sqlite3_bind_int64(s, 5, static_cast<sqlite3_int64>(e.address));
  sqlite3_bind_int64(s, 6, static_cast<sqlite3_int64>(e.size));
  bind_optional(7, kHasInactiveSplit, e.handle);
  bind_optional(8, kHasRetries, e.stream);
  bind_optional(9, kHasOoms, e.context);
  bind_optional(10, kHasRequest, e.device_free);
  return step_and_reset(s);
}

}  // namespace gmt::recorder
