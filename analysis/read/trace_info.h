// The trace's meta table as the report's header reads it (TraceInfo), and lenient lookups for the other passes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/read/trace_file.h"

namespace gmt::analysis {

// What the report's header says about the trace: read from its meta (read_trace_info), the counts filled by the
// passes.
struct TraceInfo {
  std::string path;
  std::optional<int64_t> pid;
  std::optional<std::string> command_line;
  std::optional<std::string> hostname;
  std::optional<std::string> backend;
  std::optional<std::string> backend_reason;  // meta backend_reason (v7): schema::backend_reasons
  std::optional<std::string> backend_note;    // meta backend_note: what the process said about its choice
  std::optional<std::string> tool_version;
  int schema_version = 0;
  // end_monotonic_ns - start; when the end is not recorded (incomplete trace), up to the last event and
  // duration_from_events is set.
  int64_t duration_ns = 0;
  bool duration_from_events = false;
  // meta start_monotonic_ns: the origin of every relative time in a report (and of --since/--until), as
  // CLOCK_MONOTONIC ns, so that a reader can place its own clock readings (the pytest plugin's test windows).
  std::optional<int64_t> start_monotonic_ns;
  bool complete = false;    // meta complete == "1"; otherwise the process crashed, was killed or still runs
  bool simulated = false;   // recorded under the simulated CUDA runtime
  bool symbolized = false;  // symbols were filled after the run
  uint64_t dropped_events = 0;
  uint64_t event_count = 0;                // rows of `events`, all kinds
  std::optional<std::string> stop_reason;  // meta.stop_reason: why recording ended early (a full disk...)
  uint64_t recording_pauses = 0;           // meta.recording_pauses: benchmark pauses (events then are missing)
  uint64_t recording_paused_ns = 0;
  // Pauses asked with `gpumemtrace ctl` (read/control_marks.h): when each began, absolute ns. An allocation alive when
  // one began and never freed in the trace is not judged: its free may have come while recording was paused. The
  // event pass counts those here (and leaves them out of the leaks); with any, the trace supports no leak verdict.
  std::vector<int64_t> control_pause_starts_ns;
  uint64_t unjudged_after_pause_allocations = 0;
  uint64_t unjudged_after_pause_bytes = 0;
  // A damaged trace salvaged (read/salvage.h): what was lost, as one sentence. The trace then counts as incomplete
  // (complete is false) whatever its meta says.
  std::optional<std::string> salvaged;
  // Optional tables the trace's schema has and the trace lacks, each as read/trace_tables.h words it.
  std::vector<std::string> missing_tables;
  // v8, the process `run` started: its exit code, or the signal that killed it (meta app_exit_*).
  std::optional<int64_t> app_exit_status;
  std::optional<int64_t> app_exit_signal;
  // v8, the process `run` started: events it recorded that never reached the trace (meta events_lost_at_exit).
  std::optional<int64_t> events_lost_at_exit;
  // v8, with it: events that came after the trace was closed at exit, and the frees among them (a library
  // finalized after ours freeing its memory): as many allocations may show as leaked that were freed.
  std::optional<int64_t> events_after_close;
  uint64_t frees_after_close = 0;
  // The recorder's own time per event on the app's threads (meta self_cost_*, recorder/self_cost.h): measured on
  // one event in 64 of each thread, per kind, at a clean exit; absent where no event of the kind was timed.
  struct SelfCost {
    uint64_t events_timed = 0;
    uint64_t ns_per_event = 0;
  };
  std::optional<SelfCost> self_cost_cuda;
  std::optional<SelfCost> self_cost_block;
  // v13, `run --sample-block-stacks`: blocks under this size took their stack one per this many bytes allocated; a
  // block allocation without a stack was not sampled (meta block_stack_sample_bytes). 0: every block took its stack.
  uint64_t block_stack_sample_bytes = 0;
};

// meta values are text written by the recorder; a malformed number is reported as absent rather than
// failing the whole report (TraceFile::meta_int would throw).
std::optional<int64_t> lenient_meta_int(const TraceFile& trace, const char* key);

// Whether meta `key` is "1".
bool meta_flag(const TraceFile& trace, const char* key);

// Every field of `info` the trace itself says (path, schema, meta, missing tables); the passes fill in the rest.
void read_trace_info(const TraceFile& trace, TraceInfo& info);

}  // namespace gmt::analysis
