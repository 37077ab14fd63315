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
bool record_app_exit(const std::string& trace_path, const LaunchResult& result,
                     std::optional<uint64_t> events_lost);

// A zero-filled file for the started process's event counters (GMT_EVENT_COUNTERS, schema/event_counters.h);
// "" when none can be made (then nothing is said about events lost at the end).
std::string make_event_counters_file();
// How many events the process counted in that file and did not get into its trace; nullopt when it never
// mapped the file (it recorded nothing, or is not ours). Removes the file.
std::optional<uint64_t> take_events_lost(const std::string& path);

}  // namespace gmt::cli
