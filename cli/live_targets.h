// Which running processes a `gpumemtrace ctl` or `top` target names: a PID (its traces, or those of the processes it
// started: the PID of `gpumemtrace run` stands for its app), a trace file, a directory of traces, or a trace pattern
// (`run -o`'s %p, %r, %d, %h, or a shell pattern). A process that records has a control socket beside its trace,
// "<trace>.ctl" (recorder/control_channel.h), from its first CUDA call until its trace is closed: the sockets are how
// live processes are found, and their paths name the traces.
#pragma once

#include <string>
#include <vector>

namespace gmt::cli {

inline constexpr const char* kControlSocketSuffix = ".ctl";

struct Targets {
  std::vector<std::string> sockets;  // the control sockets found, sorted, each once
  std::string error;                 // why none was found
  int exit_code = 0;                 // with it: kExitCtlNotRunning, kExitCtlRefused or kExitBadInput
};

bool is_socket(const std::string& path);
bool all_digits(const std::string& text);

Targets sockets_of_process(const std::string& pid);
// A trace file's socket, or every socket in a directory of traces.
Targets sockets_of_path(const std::string& path);
Targets sockets_of_pattern(const std::string& pattern);
// Whether `target` holds pattern characters (*, ?, [, %).
bool is_trace_pattern(const std::string& target);
// The sockets of any target: a PID, a path, or (when no file has that very name) a pattern.
Targets live_targets(const std::string& target);

// The trace beside a control socket.
std::string trace_of_socket(const std::string& socket);

}  // namespace gmt::cli
