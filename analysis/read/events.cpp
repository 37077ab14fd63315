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

// Schema 12's columns (events_sql): the row's own, with the type's id where the kind was.
enum RowColumn : int {
  kRowId,
  kRowTime,
  kRowType,
  kRowAddress,
  kRowSize,
  kRowStackId,
  kRowError,
  kRowDeviceFree,
  kRowDeviceTotal,
  kRowHandle,
  kRowThreadId,
  kRowStream,
};

schema::Api api_from_code(int64_t code) {
  return code >= 0 && code <= schema::kMaxApi ? static_cast<schema::Api>(code) : schema::Api::Unknown;
}

schema::MemoryKind memory_kind_from_code(int64_t code) {
  return code >= 0 && code <= schema::kMaxMemoryKind ? static_cast<schema::MemoryKind>(code) : schema::MemoryKind::None;
}

// Event type ids beyond this are a damaged trace's (a trace has a handful of types; the writer numbers them from 1).
constexpr int64_t kMaxTypeId = 1 << 20;

// The WHERE clause that selects `set` from `events e` (or, in schema 12, from `event_types e`).
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

// Schema 12: the types (event_types) of the events `set` reads, by id, and the clause that picks their rows. Reading
// event_rows with the types decoded here, rather than through the `events` view, saves the view's join per event: a
// 4M-event `report --format json` took 3.21 s through the view, 2.41 s so, 2.54 s at schema 11 (docs/benchmarks.md).
std::string wanted_types(const TraceFile& trace, EventSet set, std::vector<EventReader::Type>& types) {
  const std::string sql = "SELECT e.id, e.kind, e.api, e.memory_kind, e.device, e.source FROM event_types e" +
                          events_of(set) + without_cross_check(trace);
  Statement query(trace, sql.c_str());
  std::string ids;
  while (query.step()) {
    const int64_t id = query.column_int(0);
    if (id < 0 || id > kMaxTypeId) continue;  // a damaged trace: such rows are dropped, as the view's join would
    if (types.size() <= static_cast<size_t>(id)) types.resize(static_cast<size_t>(id) + 1);
    types[static_cast<size_t>(id)] = {query.column_int(1), query.column_int(2), query.column_int(3),
                                      query.column_int(4), query.column_int(5)};
    ids += (ids.empty() ? "" : ", ") + std::to_string(id);
  }
  return " WHERE e.type IN (" + ids + ")";
}

// The LEFT JOIN costs one primary-key lookup per event and saves a second pass for the failures.
std::string events_sql(const TraceFile& trace, EventSet set, std::vector<EventReader::Type>& types) {
  const bool failures_table = trace.has_table("alloc_failures");  // trace_tables.h: optional
  if (trace.has_table("event_rows")) {
    // RowColumn's order; step() fills in what the type says. Aliased `e`, as OrderedEvents' ORDER BY names it.
    return std::string("SELECT e.id, e.time_ns, e.type, e.address, e.size, e.stack_id, e.error, ") +
           (failures_table ? "f.device_free, f.device_total, " : "NULL, NULL, ") +
           "e.handle, e.thread_id, e.stream FROM event_rows e" +
           (failures_table ? " LEFT JOIN alloc_failures f ON f.event_id = e.id" : "") + wanted_types(trace, set, types);
  }
  // Schema 1 traces have no handle column: read it as 0 there.
  const char* handle_column = trace.schema_version() >= 2 ? "e.handle" : "0";
  return std::string("SELECT e.id, e.time_ns, e.kind, e.api, e.memory_kind, e.device, e.address, e.size, "
                     "e.stack_id, e.error, ") +
         (failures_table ? "f.device_free, f.device_total, " : "NULL, NULL, ") + handle_column +
         ", e.thread_id, e.stream, e.source FROM events e" +
         (failures_table ? " LEFT JOIN alloc_failures f ON f.event_id = e.id" : "") + events_of(set) +
         without_cross_check(trace);  // run --verify: the cross-check's events count nowhere
}

}  // namespace

EventReader::EventReader(const TraceFile& trace, EventSet set, EventOrder order, size_t window)
    : rows_(trace, events_sql(trace, set, types_), order, window) {}

bool EventReader::step() {
  if (!rows_.step()) return false;
  auto optional = [this](int column) {
    return rows_.column_is_null(column) ? std::nullopt : std::optional<int64_t>(rows_.column_int(column));
  };
  if (!types_.empty()) {
    // Schema 12: only rows of the wanted types come back (wanted_types), each id within types_.
    const Type& type = types_[static_cast<size_t>(rows_.column_int(kRowType))];
    row_.id = rows_.column_int(kRowId);
    row_.time_ns = rows_.column_int(kRowTime);
    row_.kind = type.kind;
    row_.api = api_from_code(type.api);
    row_.memory_kind = memory_kind_from_code(type.memory_kind);
    row_.device = type.device;
    row_.address = static_cast<uint64_t>(rows_.column_int(kRowAddress));
    row_.size = rows_.column_int(kRowSize);
    row_.stack_id = rows_.column_int(kRowStackId);
    row_.error = rows_.column_int(kRowError);
    row_.device_free = optional(kRowDeviceFree);
    row_.device_total = optional(kRowDeviceTotal);
    row_.handle = static_cast<uint64_t>(rows_.column_int(kRowHandle));
    row_.thread_id = rows_.column_int(kRowThreadId);
    row_.stream = rows_.column_int(kRowStream);
    row_.source = type.source;
    return true;
  }
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
  const std::string kind = std::to_string(static_cast<int>(schema::EventKind::SegmentAlloc));
  std::string sql = "SELECT EXISTS(SELECT 1 FROM events WHERE kind = " + kind + ")";
  if (trace.has_table("event_types")) {
    // Schema 12: the types first (a handful of rows); without a segment type no event row is read at all.
    Statement types(trace, ("SELECT group_concat(id) FROM event_types WHERE kind = " + kind).c_str());
    if (!types.step() || types.column_is_null(0)) return false;
    sql =
        "SELECT EXISTS(SELECT 1 FROM event_rows WHERE type IN (SELECT id FROM event_types WHERE kind = " + kind + "))";
  }
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
