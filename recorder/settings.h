// What the CLI tells the preload library, through environment variables read once at load time.
// The library can also be preloaded by hand with these variables; every one has a default.
#pragma once

#include <cstdint>
#include <string>

#include "schema/trace_naming.h"

namespace gmt::recorder {

// Environment variables (documented in docs/trace-format.md and `gpumemtrace run --help`).
inline constexpr const char* kEnvOutput = "GMT_OUTPUT";  // trace path pattern: %p pid, %r rank, %d GPU, %h host, %%
inline constexpr const char* kEnvRootPid = "GMT_ROOT_PID";   // pid of the process the CLI started
inline constexpr const char* kEnvRegistry = "GMT_REGISTRY";  // file where each process appends its trace path
inline constexpr const char* kEnvNoStacks = "GMT_NO_STACKS";  // "1": record events without call stacks
// "1": frees take call stacks too. Off by default: the analysis never uses a free's stack (leaks, peaks and
// growth are attributed to the allocating stack), and the walk is the costliest part of recording an event.
inline constexpr const char* kEnvFreeStacks = "GMT_FREE_STACKS";
inline constexpr const char* kEnvSimulated = "GMT_SIMULATED";  // "1": the CLI put the simulated runtime first
// "1" (`run --verify`): both driver-level backends record every event, for the cross-check (recorder/backend.h).
inline constexpr const char* kEnvVerify = "GMT_VERIFY";
// How stacks are walked (recorder/fast_unwind.h): "fast" (the default: the CFI-rule walker, libunwind where it
// gives up), "libunwind" (libunwind only: the behaviour before the fast walker, for comparisons), "check" (both
// on every stack, disagreements counted in the trace; slow, for verification).
inline constexpr const char* kEnvUnwind = "GMT_UNWIND";

// "monotonic": time events with clock_gettime(CLOCK_MONOTONIC) even where the TSC could be used
// (recorder/event_clock.h); "tsc", the default, uses it where the kernel's clock is the TSC.
inline constexpr const char* kEnvEventClock = "GMT_EVENT_CLOCK";

enum class UnwindMode : uint8_t { Fast, Libunwind, Check };

struct Settings {
  std::string output_pattern = "gpumemtrace.%p.db";
  long root_pid = 0;
  std::string registry_path;
  bool take_stacks = true;
  bool take_free_stacks = false;  // only with take_stacks
  bool simulated = false;
  UnwindMode unwind = UnwindMode::Fast;
  bool tsc_event_clock = true;
  uint64_t start_unix_ns = 0;
  uint64_t start_monotonic_ns = 0;
  schema::LaunchIdentity launch;  // rank and local GPU from the launcher's variables, read at load time
};

Settings& settings();
void load_settings_from_environment();

// The trace path for this process. The process the CLI started gets the pattern as given; any other process
// (a forked or exec'ed child) gets its pid inserted before the extension when the pattern has no %p, so
// that two processes never share a file.
std::string trace_path_for_this_process();

std::string command_line_of_this_process();
std::string host_name();

}  // namespace gmt::recorder
