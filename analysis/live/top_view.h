// `gpumemtrace top`: what a running process holds now, read from its trace while it is written (SQLite's WAL lets a
// read-only reader see the last committed batch without ever blocking the writer). One TopView per refresh, built
// from the analyzer's own Report (model/analyze.h): the same leaks, timeline, failures and tensor blocks the report
// shows at the end of the trace, taken at its last committed event. Nothing here keeps state between refreshes but
// the symbols (read/symbolizer.h's PcSymbolizer), which the process's unsymbolized trace does not hold yet.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/read/symbolizer.h"
#include "analysis/read/trace_file.h"

namespace gmt::analysis {

struct TopOptions {
  size_t sites = 8;                                  // call sites per list
  int64_t growth_window_ns = 5 * 60 * 1000000000LL;  // "grown over the last ..."
  int64_t recent_ns = 60 * 1000000000LL;             // the recent past each device's sparkline covers
  size_t sparkline_points = 40;                      // points of that sparkline
  size_t failures = 5;                               // the most recent failed allocations shown
};

// A call site as top lists it: the line that allocated (the user's frame, else the innermost one) and the frames
// above it, symbolized.
struct TopSite {
  std::string where;               // "keep_kv_entry service_loop.cu:52", or the innermost frame's label
  std::vector<std::string> stack;  // the stack as the report shows it (stack_view_lines), at most a few lines
  uint64_t bytes = 0;              // live now
  uint64_t count = 0;              // allocations live now
  int64_t growth_bytes = 0;        // live now less live at the start of the growth window (by_growth only)
};

struct TopDevice {
  int64_t device = -1;  // -1: host memory
  uint64_t cuda_bytes = 0;
  uint64_t cuda_peak_bytes = 0;
  std::optional<uint64_t> tensor_bytes;  // held by PyTorch's tensors (blocks), when they are recorded
  std::vector<uint64_t> recent;          // CUDA-level live bytes, the highest of each point, oldest first
};

struct TopFailure {
  int64_t time_ns = 0;  // relative to the process start
  uint64_t requested_bytes = 0;
  int64_t device = -1;
  std::string label;  // "out of memory", "fragmentation", ...
  std::string where;
};

struct TopView {
  std::string trace_path;
  std::optional<int64_t> pid;
  std::string command_line;
  bool aggregate = false;   // run --aggregate: growth from its per-window sums
  bool complete = false;    // the process has ended cleanly (the trace says so)
  bool paused = false;      // recording is paused now (run --paused, ctl pause)
  int64_t duration_ns = 0;  // from the process start to the last committed event
  uint64_t events = 0;
  std::string level;                 // what the sites hold: "CUDA allocations" or "tensors and other CUDA memory"
  int64_t recent_span_ns = 0;        // the time the sparklines cover
  int64_t growth_window_ns = 0;      // the window by_growth covers (shorter than asked when the run is)
  std::vector<TopDevice> devices;    // by device
  std::vector<TopSite> by_live;      // most bytes first
  std::vector<TopSite> by_growth;    // most growth first; only sites that grew
  std::vector<TopFailure> failures;  // most recent last
  uint64_t failures_total = 0;
  std::vector<std::string> notes;  // what limits the figures (a pause, an unjudged allocation ...)
};

// One view of the trace as it stands. Throws TraceError when it cannot be read. `symbols` is read from and filled.
TopView build_top_view(const TraceFile& trace, const TopOptions& options, PcSymbolizer& symbols);

}  // namespace gmt::analysis
