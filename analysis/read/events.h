// The events table as the passes read it: one typed row per event, decoded once, in time order. The SQL of the
// events (which columns, which joins, which events a pass reads) lives here and nowhere else.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/read/ordered_events.h"
#include "analysis/read/trace_file.h"
#include "schema/trace_schema.h"

namespace gmt::analysis {

// Which events one pass reads (heaps.h says which sources are heaps). The recorder keeps the events of source
// torch_allocator in time order with all others since v7; in v6 traces they were drained from PyTorch's history up to
// seconds late, had no segments, and are read on their own (the TensorBlocks pass) only.
enum class EventSet {
  CudaLevel,     // every event but heaps' blocks: device memory; heaps' segments only say which memory backs them
  TensorBlocks,  // source torch_allocator only; a block counts as device memory within this pass
  // What the app holds: heaps' blocks (as device memory) and every CUDA-level allocation that backs no heap
  // segment (the CudaLevel pass found which do); heaps' segments give the heaps' layout.
  AppLevel,
};

// One event with the figures of its alloc_failures row (when it has one).
struct EventRow {
  int64_t id = 0;
  int64_t time_ns = 0;  // as recorded (CLOCK_MONOTONIC)
  // A schema::EventKind code, kept as a code: a kind this build does not know (a newer writer, a damaged trace)
  // must change nothing, and comparing codes lets it fall through every branch.
  int64_t kind = 0;
  // Codes outside the enums (a damaged trace) read as Api::Unknown and MemoryKind::None, values to_string names.
  schema::Api api = schema::Api::Unknown;
  schema::MemoryKind memory_kind = schema::MemoryKind::None;
  int64_t device = 0;
  uint64_t address = 0;
  int64_t size = 0;  // signed as stored: a negative size (a damaged trace) is counted as an inconsistency
  int64_t stack_id = 0;
  int64_t error = 0;                   // cudaError_t of an AllocFailed
  std::optional<int64_t> device_free;  // alloc_failures: cudaMemGetInfo right after the failure
  std::optional<int64_t> device_total;
  uint64_t handle = 0;  // VMM handle or pool (0 in schema 1 traces, which have no handle column)
  int64_t thread_id = 0;
  int64_t stream = 0;
  int64_t source = 0;  // a schema::Source code (heaps.h tells heaps' sources apart)
};

// The events of one set in (time_ns, id) order (ordered_events.h says how `order` and `window` obtain it), without
// the cross-check's events of a run --verify trace. step() returns false after the last row; row() is the current
// one, valid until the next step().
class EventReader {
 public:
  EventReader(const TraceFile& trace, EventSet set, EventOrder order, size_t window);

  bool step();
  const EventRow& row() const { return row_; }

  // Schema 12: what an event type (event_types' row of that id) says of its events.
  struct Type {
    int64_t kind = 0;
    int64_t api = 0;
    int64_t memory_kind = 0;
    int64_t device = 0;
    int64_t source = 0;
  };

 private:
  std::vector<Type> types_;  // by type id; empty before schema 12 (the rows carry kind, api, ... themselves)
  OrderedEvents rows_;
  EventRow row_;
};

// The highest event id (the rowid index: no scan), an estimate of the event count for progress; 0 when empty.
uint64_t highest_event_id(const TraceFile& trace);

// Whether the trace has a SegmentAlloc event (a heap's segment: heaps.h).
bool has_segment_events(const TraceFile& trace);

// The earliest event's time; nullopt for a trace without events.
std::optional<int64_t> first_event_time(const TraceFile& trace);

// The table of the event rows themselves: "event_rows" from schema v12 on (where `events` is a view joining their
// types), else "events". For queries on id, time_ns, thread_id, stream, address, size, stack_id, error and
// handle only.
std::string event_rows_table(const TraceFile& trace);

// What to add to a WHERE clause on `events e` so that the cross-check's events count in no figure:
// " AND e.source != N" in a run --verify trace, "" otherwise.
std::string without_cross_check(const TraceFile& trace);

}  // namespace gmt::analysis
