// The marks `gpumemtrace ctl` leaves in a trace (recorder/control_channel.h): in the domain "gpumemtrace", "pause"
// and "resume" where recording was paused and resumed, "snapshot:NAME" where a moment was named.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gmt::analysis {

class TraceFile;

struct ControlMarks {
  std::vector<int64_t> pause_starts_ns;  // absolute (CLOCK_MONOTONIC), ascending
  std::vector<int64_t> resumes_ns;       // absolute, ascending
  struct Snapshot {
    std::string name;
    int64_t time_ns = 0;  // absolute
  };
  std::vector<Snapshot> snapshots;  // ascending by time
};

// Empty for a trace without marks (older schemas, or no ctl request).
ControlMarks read_control_marks(const TraceFile& trace);

}  // namespace gmt::analysis
