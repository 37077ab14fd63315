// What the cross-check of `run --verify` (verify.h) reads: both driver-level backends' events, each under its own
// source, and which backend the trace names as counting and which as checking.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/read/trace_file.h"
#include "schema/trace_schema.h"

namespace gmt::analysis {

// One event of either backend, as the matching sees it: codes kept as stored, since unmatched events are grouped
// by them (verify.cpp names them only when it reports a group).
struct CheckedEvent {
  int64_t id = 0;
  int64_t time_ns = 0;  // as recorded (CLOCK_MONOTONIC)
  int64_t thread_id = 0;
  int64_t kind = 0;  // schema::EventKind code
  int64_t memory_kind = 0;
  int64_t api = 0;
  int64_t device = -1;
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t handle = 0;
  int64_t stack_id = 0;
  int64_t source = 0;     // schema::Source: Cupti or DriverHook
  bool counting = false;  // the counting backend's event; false: the cross-check's
};

// The source a backend's events carry (schema::Source); nullopt for a name this reader does not know.
std::optional<schema::Source> source_of_backend(const std::optional<std::string>& name);

// The source of the cross-check's events, which count in no figure; nullopt outside a run --verify trace, and in a
// trace that names the counting backend twice (its own events are never left out).
std::optional<schema::Source> cross_check_source(const TraceFile& trace);

// Both backends' events, in recording order (events.id).
std::vector<CheckedEvent> read_backend_events(const TraceFile& trace, schema::Source counting, schema::Source checking);

}  // namespace gmt::analysis
