// How the process `run` started ended, stored in its trace (meta app_exit_status / app_exit_signal), so that
// `report` can say it long after the run's terminal is gone.
#pragma once

#include <string>

#include "cli/launcher.h"

namespace gmt::cli {

// Writes the exit status or the terminating signal of `result` into the trace at `trace_path`. Returns false,
// after one stderr line, when the trace cannot be written (the run's exit code is the app's all the same).
bool record_app_exit(const std::string& trace_path, const LaunchResult& result);

}  // namespace gmt::cli
