#include "analysis/read/events.h"

#include <algorithm>

#include "analysis/read/cross_check.h"

namespace gmt::analysis {
namespace {

// The columns of the events query, in its order; OrderedEvents wants the id first and the time second. What the
// row itself holds comes first; then what its type says, which in schema 12 is the one column kKind, the event_types
// id (step() looks the rest up in memory).
enum Column : int {
  kId,
  kTime,
  kAddress,
  kSize,
  kStackId,
  kError,
  kDeviceFree,
  kDeviceTotal,
  kHandle,
  kThreadId,
  kStream,
  kKind,  // schema 12: the type's id
  kApi,
  kMemoryKind,
  kDevice,
  kSource,
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

// The LEFT JOIN costs one primary-key lookup per event and saves a second pass for the failures. Column's order;
// aliased `e`, as OrderedEvents' ORDER BY names it.
std::string events_sql(const TraceFile& trace, EventSet set, std::vector<EventReader::Type>& types) {
  const bool failures_table = trace.has_table("alloc_failures");  // trace_tables.h: optional
  const bool typed = trace.has_table("event_rows");
  // Schema 1 traces have no handle column: read it as 0 there.
  const char* handle_column = typed || trace.schema_version() >= 2 ? "e.handle" : "0";
  return std::string("SELECT e.id, e.time_ns, e.address, e.size, e.stack_id, e.error, ") +
         (failures_table ? "f.device_free, f.device_total, " : "NULL, NULL, ") + handle_column +
         ", e.thread_id, e.stream, " +
         (typed ? "e.type FROM event_rows e" : "e.kind, e.api, e.memory_kind, e.device, e.source FROM events e") +
         (failures_table ? " LEFT JOIN alloc_failures f ON f.event_id = e.id" : "") +
         (typed ? wanted_types(trace, set, types)
                : events_of(set) + without_cross_check(trace));  // run --verify: its cross-check counts nowhere
}

}  // namespace

EventReader::EventReader(const TraceFile& trace, EventSet set, EventOrder order, size_t window)
    : rows_(trace, events_sql(trace, set, types_), order, window) {}

bool EventReader::step() {
  if (!rows_.step()) return false;
  auto optional = [this](int column) {
    return rows_.column_is_null(column) ? std::nullopt : std::optional<int64_t>(rows_.column_int(column));
  };
  row_.id = rows_.column_int(kId);
  row_.time_ns = rows_.column_int(kTime);
  row_.address = static_cast<uint64_t>(rows_.column_int(kAddress));
  row_.size = rows_.column_int(kSize);
  row_.stack_id = rows_.column_int(kStackId);
  row_.error = rows_.column_int(kError);
  row_.device_free = optional(kDeviceFree);
  row_.device_total = optional(kDeviceTotal);
  row_.handle = static_cast<uint64_t>(rows_.column_int(kHandle));
  row_.thread_id = rows_.column_int(kThreadId);
  row_.stream = rows_.column_int(kStream);
  Type type;
  if (types_.empty()) {
    type = {rows_.column_int(kKind), rows_.column_int(kApi), rows_.column_int(kMemoryKind), rows_.column_int(kDevice),
            rows_.column_int(kSource)};
  } else {
    type = types_[static_cast<size_t>(rows_.column_int(kKind))];  // only wanted types' rows come back (wanted_types)
  }
  row_.kind = type.kind;
  row_.api = api_from_code(type.api);
  row_.memory_kind = memory_kind_from_code(type.memory_kind);
  row_.device = type.device;
  row_.source = type.source;
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
    const std::optional<std::string> ids = types.step() ? types.column_text(0) : std::nullopt;
    if (!ids) return false;
    sql = "SELECT EXISTS(SELECT 1 FROM event_rows WHERE type IN (" + *ids + "))";
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
