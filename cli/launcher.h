// Starting the profiled app: fork, set up the preload environment, exec, forward signals, wait.
#pragma once

#include <string>
#include <vector>

namespace gmt::cli {

struct LaunchSpec {
  std::vector<std::string> command;                              // argv of the app; command[0] is looked up in PATH
  std::vector<std::pair<std::string, std::string>> environment;  // set in the child before exec
  std::string output_pattern;  // trace path pattern (%p, %h); checked in the child before exec
  bool overwrite = false;      // --force: remove an existing trace at the root's path first
};

struct LaunchResult {
  bool started = false;
  int exit_code = 0;  // the app's exit code, or 128 + signal, as a shell reports it
  int signal = 0;     // the signal that ended the app, 0 if it exited
  long pid = 0;
  std::string root_trace_path;  // the trace path of the started process
  std::string error;            // why it did not start (started == false)
  int error_exit_code = 0;      // 126/127 (cannot execute / not found) or 125 (our own failure: bad output path)
};

LaunchResult launch_and_wait(const LaunchSpec& spec);

}  // namespace gmt::cli
