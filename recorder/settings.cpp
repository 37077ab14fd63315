#include "recorder/settings.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "recorder/cache_hints.h"
#include "schema/environment.h"
#include "schema/trace_naming.h"

namespace gmt::recorder {
namespace {

namespace env = schema::env;

uint64_t clock_ns(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

std::atomic<Settings*> g_settings{nullptr};

Settings& make_settings() {
  static Settings* created = new Settings;  // leaked on purpose: used until the very last destructor
  g_settings.store(created, std::memory_order_release);
  return *created;
}

void load_settings_from_environment() {
  Settings& s = settings();
  if (const char* v = getenv(env::kOutput); v && *v) s.output_pattern = v;
  if (const char* v = getenv(env::kRootPid); v && *v) s.root_pid = std::strtol(v, nullptr, 10);
  if (const char* v = getenv(env::kRegistry); v && *v) s.registry_path = v;
  if (const char* v = getenv(env::kEventCounters); v && *v) s.event_counters_path = v;
  if (const char* v = getenv(env::kNoStacks); v && *v == '1') s.take_stacks = false;
  if (const char* v = getenv(env::kFreeStacks); v && *v == '1') s.take_free_stacks = true;
  if (const char* v = getenv(env::kAggregate); v && *v == '1') s.aggregate = true;
  if (const char* v = getenv(env::kStartPaused); v && *v == '1') s.start_paused = true;
  if (const char* v = getenv(env::kAggregateWindowMs); v && *v) {
    const long long ms = std::atoll(v);
    if (ms > 0 && ms < 86400000) s.aggregate_window_ns = static_cast<uint64_t>(ms) * 1000000ull;
  }
  if (const char* v = getenv(env::kStackMemo); v && *v == '0') s.stack_memo = false;
  if (const char* v = getenv(env::kStackCut); v && *v == '1') s.stack_cut = true;
  if (const char* v = getenv(env::kSimulated); v && *v == '1') s.simulated = true;
  if (const char* v = getenv(env::kUnwind); v && *v) {
    if (std::strcmp(v, "libunwind") == 0)
      s.unwind = UnwindMode::Libunwind;
    else if (std::strcmp(v, "check") == 0)
      s.unwind = UnwindMode::Check;
    else if (std::strcmp(v, "fast") != 0)
      std::fprintf(stderr, "gpumemtrace: %s=%s is not fast, libunwind or check: using fast\n", env::kUnwind, v);
  }
  // Not under the check mode, which compares whole stacks: decided here, once, rather than on each event.
  if (const char* v = getenv(env::kBlockStacks); v && std::strcmp(v, "python") == 0) {
    s.block_python_stacks = s.unwind != UnwindMode::Check;
  }
  if (const char* v = getenv(env::kBlockStackSample); v && *v) {
    char* end = nullptr;
    const unsigned long long bytes = std::strtoull(v, &end, 10);
    if (end != v && *end == '\0')
      s.block_stack_sample_bytes = bytes;
    else
      std::fprintf(stderr, "gpumemtrace: %s=%s is not a number of bytes: every block takes its stack\n",
                   env::kBlockStackSample, v);
  }
  if (const char* v = getenv(env::kEventClock); v && *v) {
    if (std::strcmp(v, "monotonic") == 0)
      s.tsc_event_clock = false;
    else if (std::strcmp(v, "tsc") != 0)
      std::fprintf(stderr, "gpumemtrace: %s=%s is not tsc or monotonic: using tsc\n", env::kEventClock, v);
  }
  s.launch = schema::launch_identity_from_environment();
  s.start_unix_ns = clock_ns(CLOCK_REALTIME);
  s.start_monotonic_ns = clock_ns(CLOCK_MONOTONIC);
}

std::string trace_path_for_this_process() {
  const Settings& s = settings();
  long pid = static_cast<long>(getpid());
  bool is_root = s.root_pid == 0 || s.root_pid == pid;
  std::string pattern = is_root ? s.output_pattern : schema::child_trace_pattern(s.output_pattern);
  return schema::expand_trace_pattern(pattern, pid, host_name(), s.launch);
}

std::string command_line_of_this_process() {
  std::string out;
  FILE* f = std::fopen("/proc/self/cmdline", "rb");
  if (!f) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  while (!out.empty() && out.back() == '\0') out.pop_back();
  for (char& c : out) {
    if (c == '\0') c = ' ';
  }
  return out;
}

std::string host_name() { return schema::current_host_name(); }

}  // namespace gmt::recorder
