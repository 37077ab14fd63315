#include "analysis/read/events.h"

#include <algorithm>

#include "analysis/read/cross_check.h"

namespace gmt::analysis {
namespace {

// The columns of the events query, in its order; OrderedEvents wants the id first and the time second.
enum Column : int {
  kId,
  kTime,
  kKind,
  kApi,
  kMemoryKind,
  kDevice,
  kAddress,
  kSize,
  kStackId,
  kError,
  kDeviceFree,
  kDeviceTotal,
  kHandle,
  kThreadId,
  kStream,
  kSource,
};

schema::Api api_from_code(int64_t code) {
  return code >= 0 && code <= schema::kMaxApi ? static_cast<schema::Api>(code) : schema::Api::Unknown;
}

schema::MemoryKind memory_kind_from_code(int64_t code) {
  return code >= 0 && code <= schema::kMaxMemoryKind ? static_cast<schema::MemoryKind>(code) : schema::MemoryKind::None;
}

// The WHERE clause that selects `set` from `events e`.
std::string events_of(EventSet set) {
  const int torch = static_cast<int>(schema::Source::TorchAllocator);
  const std::string heaps = std::to_string(torch) + ", " +
                            std::to_string(static_cast<int>(schema::Source::NvtxMemory)) + ", " +
                            std::to_string(static_cast<int>(schema::Source::CupyAllocator));
  const std::string segments = std::to_string(static_cast<int>(schema::EventKind::SegmentAlloc)) + ", " +
                               std::to_string(static_cast<int>(schema::EventKind::SegmentFree));
  switch (set) {
    case EventSet::TensorBlocks: return " WHERE e.source = " + std::to_string(torch);
    case EventSet::AppLevel: return " WHERE 1";
    case EventSet::CudaLevel:
    default: return " WHERE (e.source NOT IN (" + heaps + ") OR e.kind IN (" + segments + "))";
  }
}

// The LEFT JOIN costs one primary-key lookup per event and saves a second pass for the failures.
std::string events_sql(const TraceFile& trace, EventSet set) {
  // Schema 1 traces have no handle column: read it as 0 there.
  const char* handle_column = trace.schema_version() >= 2 ? "e.handle" : "0";
  const bool failures_table = trace.has_table("alloc_failures");  // trace_tables.h: optional
  return std::string("SELECT e.id, e.time_ns, e.kind, e.api, e.memory_kind, e.device, e.address, e.size, "
                     "e.stack_id, e.error, ") +
         (failures_table ? "f.device_free, f.device_total, " : "NULL, NULL, ") + handle_column +
         ", e.thread_id, e.stream, e.source FROM events e" +
         (failures_table ? " LEFT JOIN alloc_failures f ON f.event_id = e.id" : "") + events_of(set) +
         without_cross_check(trace);  // run --verify: the cross-check's events count nowhere
}

}  // namespace

EventReader::EventReader(const TraceFile& trace, EventSet set, EventOrder order, size_t window)
    : rows_(trace, events_sql(trace, set), order, window) {}

bool EventReader::step() {
  if (!rows_.step()) return false;
  auto optional = [this](int column) {
    return rows_.column_is_null(column) ? std::nullopt : std::optional<int64_t>(rows_.column_int(column));
  };
  row_.id = rows_.column_int(kId);
  row_.time_ns = rows_.column_int(kTime);
  row_.kind = rows_.column_int(kKind);
  row_.api = api_from_code(rows_.column_int(kApi));
  row_.memory_kind = memory_kind_from_code(rows_.column_int(kMemoryKind));
  row_.device = rows_.column_int(kDevice);
  row_.address = static_cast<uint64_t>(rows_.column_int(kAddress));
  row_.size = rows_.column_int(kSize);
  row_.stack_id = rows_.column_int(kStackId);
  row_.error = rows_.column_int(kError);
  row_.device_free = optional(kDeviceFree);
  row_.device_total = optional(kDeviceTotal);
  row_.handle = static_cast<uint64_t>(rows_.column_int(kHandle));
  row_.thread_id = rows_.column_int(kThreadId);
  row_.stream = rows_.column_int(kStream);
  row_.source = rows_.column_int(kSource);
  return true;
}

uint64_t highest_event_id(const TraceFile& trace) {
  // The rowid index: no scan (through v12's events view max(id) would scan every row).
  Statement highest(trace, ("SELECT coalesce(max(id), 0) FROM " + event_rows_table(trace)).c_str());
  return highest.step() ? static_cast<uint64_t>(std::max<int64_t>(0, highest.column_int(0))) : 0;
}

bool has_segment_events(const TraceFile& trace) {
  const std::string sql = "SELECT EXISTS(SELECT 1 FROM events WHERE kind = " +
                          std::to_string(static_cast<int>(schema::EventKind::SegmentAlloc)) + ")";
  Statement query(trace, sql.c_str());
  return query.step() && query.column_int(0) != 0;
}

std::optional<int64_t> first_event_time(const TraceFile& trace) {
  Statement first(trace, ("SELECT MIN(time_ns) FROM " + event_rows_table(trace)).c_str());
  if (!first.step() || first.column_is_null(0)) return std::nullopt;
  return first.column_int(0);
}

std::string event_rows_table(const TraceFile& trace) { return trace.has_table("event_rows") ? "event_rows" : "events"; }

std::string without_cross_check(const TraceFile& trace) {
  const std::optional<schema::Source> checking = cross_check_source(trace);
  return checking ? " AND e.source != " + std::to_string(static_cast<int>(*checking)) : "";
}

}  // namespace gmt::analysis
