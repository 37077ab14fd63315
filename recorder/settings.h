// What the CLI tells the preload library, through environment variables read once at load time (their names and
// meanings: schema/environment.h). The library can also be preloaded by hand with these variables; every one has a
// default.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "schema/trace_naming.h"

namespace gmt::recorder {

enum class UnwindMode : uint8_t { Fast, Libunwind, Check };

struct Settings {
  std::string output_pattern = "gpumemtrace.%p.db";
  long root_pid = 0;
  std::string registry_path;
  std::string event_counters_path;  // GMT_EVENT_COUNTERS: mapped by the process `run` started only
  bool take_stacks = true;
  bool take_free_stacks = false;              // only with take_stacks
  bool aggregate = false;                     // GMT_AGGREGATE=1: a bounded trace (recorder/aggregator.h)
  uint64_t aggregate_window_ns = 1000000000;  // GMT_AGGREGATE_WINDOW_MS: its first window
  bool simulated = false;
  bool start_paused = false;  // GMT_START_PAUSED=1 (run --paused): recording off until `ctl resume`
  UnwindMode unwind = UnwindMode::Fast;
  bool stack_memo = true;  // GMT_STACK_MEMO=0 turns the stack memo off (recorder/stacks.h), for comparisons
  bool stack_cut = false;  // GMT_STACK_CUT=1: memo answers rest on the walk's check up to the eval loop (stacks.cpp)
  // GMT_BLOCK_STACKS=python, not with GMT_UNWIND=check: blocks in Python threads take their Python frames only.
  bool block_python_stacks = false;
  // GMT_BLOCK_STACK_SAMPLE: blocks under this size take their stack one per this many bytes (block_stack_sample.h);
  // 0: every block takes its stack.
  uint64_t block_stack_sample_bytes = 0;
  bool tsc_event_clock = true;
  uint64_t start_unix_ns = 0;
  uint64_t start_monotonic_ns = 0;
  schema::LaunchIdentity launch;  // rank and local GPU from the launcher's variables, read at load time
};

// The process's settings, read once at load. Inline: every event reads some, and a function-static's guard kept
// GCC from inlining (callgrind, 2026-12-07: 7 to 20 instructions an event).
extern std::atomic<Settings*> g_settings;  // settings.cpp; nullptr until the first call
Settings& make_settings();
inline Settings& settings() {
  Settings* s = g_settings.load(std::memory_order_acquire);
  return __builtin_expect(s != nullptr, 1) ? *s : make_settings();
}
void load_settings_from_environment();

// The trace path for this process. The process the CLI started gets the pattern as given; any other process
// (a forked or exec'ed child) gets its pid inserted before the extension when the pattern has no %p, so
// that two processes never share a file.
std::string trace_path_for_this_process();

std::string command_line_of_this_process();
std::string host_name();

}  // namespace gmt::recorder
