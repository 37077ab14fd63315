// How the process `run` started ended, stored in its trace (meta app_exit_status / app_exit_signal), so that
// `report` can say it long after the run's terminal is gone.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cli/launcher.h"

namespace gmt::cli {

// Writes the exit status or the terminating signal of `result` into the trace at `trace_path`, and the events
// the process recorded and lost at its end when they are known. Returns false, after one stderr line, when the
// trace cannot be written (the run's exit code is the app's all the same).
// What the process's shared counters said once it was gone (schema/event_counters.h).
struct EventsAtExit {
  uint64_t lost = 0;                // recorded, never in the trace (meta events_lost_at_exit)
  uint64_t events_after_close = 0;  // came after the trace was closed (meta events_after_close)
  uint64_t frees_after_close = 0;   // of which frees (meta frees_after_close)
};

bool record_app_exit(const std::string& trace_path, const LaunchResult& result,
                     const std::optional<EventsAtExit>& events);

// A zero-filled file for the started process's event counters (GMT_EVENT_COUNTERS, schema/event_counters.h);
// "" when none can be made (then nothing is said about events lost at the end).
std::string make_event_counters_file();
// How many events the process counted in that file and did not get into its trace, and how many came after it was
// closed; nullopt when it never mapped the file (it recorded nothing, or is not ours). Removes the file.
std::optional<EventsAtExit> take_events_at_exit(const std::string& path);

}  // namespace gmt::cli
