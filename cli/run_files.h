// The small files `run` shares with the processes it profiles (the registry of their traces, the event counters
// they leave at exit), made in a temporary folder and removed when the run ends. A run that is itself killed
// (SIGKILL, OOM killer) cannot remove them: each name carries the run's pid, and every later run removes the files
// of runs that no longer exist.
#pragma once

#include <string>

namespace gmt::cli {

// Makes "<dir>/gpumemtrace-<kind>-<this pid>-XXXXXX" (mkstemp), empty; returns its path, or "" when it cannot.
std::string make_run_file(const std::string& dir, const std::string& kind);

// Removes the files make_run_file made in `dir` under `kind` for runs whose process is gone. Returns how many.
int remove_files_of_ended_runs(const std::string& dir, const std::string& kind);

// $TMPDIR, else /tmp.
std::string temporary_folder();

}  // namespace gmt::cli
