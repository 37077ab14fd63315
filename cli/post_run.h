// What `run` does after the app exited: symbolize each trace the run produced and print a short summary.
// Shared with `symbolize`, which does the first half on traces recorded with --no-symbolize.
#pragma once

#include <string>

namespace gmt::cli {

// Symbolizes one trace in place, with a progress line on stderr when stderr is a terminal. Returns false
// (after printing why) when the trace cannot be opened or written.
bool symbolize_trace_file(const std::string& path, bool quiet);

// Prints "allocations, peak, leaked" for one trace to stderr. Returns false when the trace cannot be read.
bool print_run_summary(const std::string& path);

// The stand-in trace `run` writes when the started process left none, so `report` always has a file.
struct EmptyTrace {
  std::string path;
  long pid = 0;
  std::string command_line;
  bool simulated = false;
  std::string backend;             // meta.backend (schema::backend_names), empty when not decided ("auto")
  std::string stop_reason;         // empty: the app exited without touching CUDA, the trace is complete;
                                   // else why nothing was recorded (meta.stop_reason), and it is incomplete
  std::string verify_unavailable;  // run --verify: why nothing was cross-checked (meta.verify_unavailable)
};
bool write_empty_trace(const EmptyTrace& trace, std::string& error);

// True for a trace file the process left before its schema was committed (it ended while the writer was
// creating the trace): an empty file, or an SQLite file without the meta table. Such a file is no trace.
bool is_trace_stump(const std::string& path);

}  // namespace gmt::cli
