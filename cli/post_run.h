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

// Writes an empty, valid trace for a process that never touched CUDA (so `report` always has a file).
bool write_empty_trace(const std::string& path, long pid, const std::string& command_line, bool simulated,
                       std::string& error);

}  // namespace gmt::cli
