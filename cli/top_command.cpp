// `gpumemtrace top`: a live view of running processes, read from their traces (analysis/live/top_view.h). The process
// serves nothing: its writer thread commits a batch at least every 200 ms, and top opens the trace read-only at each
// refresh (SQLite's WAL: a reader never blocks the writer), so watching costs the app nothing but the machine's CPU.
#include <fmt/format.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/live/top_text.h"
#include "analysis/live/top_view.h"
#include "analysis/read/trace_file.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/live_targets.h"

namespace gmt::cli {
namespace {

constexpr int kFirstReadTries = 20;  // a process that just made its first CUDA call: its trace is being created
constexpr long kFirstReadRetryNs = 100'000'000;

volatile sig_atomic_t g_stop = 0;
void on_stop_signal(int) { g_stop = 1; }

struct TopOptions {
  std::string target;
  bool once = false;
  double interval_s = 1.0;
  double window_s = 300.0;
  size_t sites = 8;
};

struct Watched {
  std::string trace;
  std::unique_ptr<analysis::PcSymbolizer> symbols = std::make_unique<analysis::PcSymbolizer>();
};

bool has_socket(const Watched& watched) { return is_socket(watched.trace + kControlSocketSuffix); }

// Whether the trace's process still runs: its control socket is there (removed when its trace is closed) and so is
// the process (a process killed by SIGKILL leaves its socket behind).
bool running(const Watched& watched, const std::optional<int64_t>& pid) {
  if (!has_socket(watched)) return false;
  return !pid || kill(static_cast<pid_t>(*pid), 0) == 0 || errno == EPERM;
}

// The traces a target names, or an exit code after saying why not. A trace file is watched whether or not its
// process still runs (a finished trace gives one frame); a PID, directory or pattern names the processes running.
int resolve(const std::string& target, std::vector<Watched>& watched) {
  struct stat st {};
  const bool exists = stat(target.c_str(), &st) == 0;
  if (exists && S_ISREG(st.st_mode)) {
    watched.push_back(Watched{target});
    return kExitOk;
  }
  if (!exists && !all_digits(target) && !is_trace_pattern(target)) {
    fmt::print(stderr, "gpumemtrace top: {}: no such trace, directory or process\n", target);
    return kExitBadInput;
  }
  Targets targets = live_targets(target);
  if (targets.sockets.empty()) {
    fmt::print(stderr, "gpumemtrace top: {}\n", targets.error);
    return targets.exit_code;
  }
  for (const std::string& socket : targets.sockets) watched.push_back(Watched{trace_of_socket(socket)});
  return kExitOk;
}

size_t terminal_width(bool tty) {
  winsize size{};
  if (tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 0;  // no cut
}

struct Section {
  std::string text;
  bool running = false;
  std::string error;  // set when the trace could not be read
};

// One section: the view of one trace, or why it cannot be read.
Section section(Watched& watched, const analysis::TopOptions& options, size_t width) {
  Section out;
  try {
    const analysis::TraceFile trace = analysis::TraceFile::open(watched.trace);
    // One read transaction: every query of the view sees the same committed batches (WAL: a snapshot, never a lock
    // the process's writer waits for).
    trace.exec("BEGIN");
    const analysis::TopView view = analysis::build_top_view(trace, options, *watched.symbols);
    trace.exec("COMMIT");
    out.running = running(watched, view.pid);
    out.text = analysis::render_top_section(
        view, out.running ? analysis::TopState::Recording : analysis::TopState::Ended, width);
  } catch (const analysis::TraceError& e) {
    out.running = running(watched, std::nullopt);
    out.error = e.what();
    out.text = fmt::format("{}: cannot be read now: {}\n", watched.trace, e.what());
  }
  return out;
}

void sleep_for(double seconds) {
  const double whole = std::floor(seconds);
  timespec left{static_cast<time_t>(whole), static_cast<long>((seconds - whole) * 1e9)};
  while (!g_stop && nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
}

int watch(const TopOptions& cli) {
  std::vector<Watched> watched;
  if (int code = resolve(cli.target, watched); code != kExitOk) return code;
  analysis::TopOptions options;
  options.sites = cli.sites;
  options.growth_window_ns = static_cast<int64_t>(cli.window_s * 1e9);

  const bool tty = isatty(STDOUT_FILENO) != 0;
  struct sigaction stop {};
  stop.sa_handler = on_stop_signal;  // no SA_RESTART: the sleep ends at once
  sigaction(SIGINT, &stop, nullptr);
  sigaction(SIGTERM, &stop, nullptr);
  for (bool first = true; !g_stop; first = false) {
    const size_t width = terminal_width(tty);
    std::string frame;
    bool any_running = false;
    for (Watched& w : watched) {
      Section shown = section(w, options, width);
      // The first read of a single trace decides the exit code; a live one may still be being created.
      for (int tries = 1; first && !shown.error.empty() && shown.running && tries < kFirstReadTries; ++tries) {
        sleep_for(kFirstReadRetryNs / 1e9);
        shown = section(w, options, width);
      }
      if (first && !shown.error.empty() && watched.size() == 1) {
        fmt::print(stderr, "gpumemtrace top: {}\n", shown.error);
        return kExitBadInput;
      }
      any_running = any_running || shown.running;
      frame += (frame.empty() ? "" : "\n") + shown.text;
    }
    // A terminal gets each frame in place of the last; a pipe or file gets every frame, one after the other.
    std::fputs(tty ? ("\x1b[H\x1b[2J" + frame).c_str() : (first ? frame : "\n" + frame).c_str(), stdout);
    std::fflush(stdout);
    if (cli.once || !any_running) return kExitOk;
    sleep_for(cli.interval_s);
  }
  return kExitOk;  // interrupted (Ctrl-C): a clean end
}

}  // namespace

CommandAction add_top_command(CLI::App& app) {
  auto options = std::make_shared<TopOptions>();
  CLI::App* cmd = app.add_subcommand("top", "A live view of a running process's GPU memory, read from its trace");
  cmd->footer(
      "TARGET is the process's PID (or that of `gpumemtrace run`, which stands for its app), its trace file, a\n"
      "directory of traces or the run's trace pattern ('traces/t.%p.db'): one section per process running.\n"
      "Each refresh shows, read from the trace as the process writes it (never blocking it):\n"
      "  live bytes per device at CUDA level (and held by PyTorch's tensors) with a sparkline of the recent past,\n"
      "  the call sites holding the most (the tensor's Python line where PyTorch's are recorded), symbolized now,\n"
      "  the call sites that grew the most over the last --window seconds, and the recent failed allocations.\n"
      "It refreshes every --interval seconds until the processes end (then exit 0); on a terminal each frame\n"
      "replaces the last, into a pipe or a file every frame follows the last. A finished trace gives one frame.\n"
      "Each refresh analyzes the trace as `report` does: on a full trace of a long run that grows with the run;\n"
      "record services with `run --aggregate`, whose trace stays bounded.\n"
      "Examples:\n"
      "  gpumemtrace top 12345\n"
      "  gpumemtrace top --once svc.db        # one frame, for scripts\n"
      "  gpumemtrace top 'traces/*.db'        # every process of a job\n"
      "Exit codes: 0 done (the processes ended, --once, or Ctrl-C), 2 no such trace or an unreadable one,\n"
      "8 no such process or nothing running there, 9 another user's process.");
  cmd->add_option("target", options->target, "PID, trace file, directory of traces, or trace pattern")->required();
  cmd->add_flag("--once", options->once, "Print one frame and exit");
  cmd->add_option("--interval", options->interval_s, "Seconds between refreshes")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  cmd->add_option("--window", options->window_s, "Growth over the last this many seconds")
      ->check(CLI::Range(1.0, 30.0 * 86400.0))
      ->capture_default_str();
  cmd->add_option("--sites", options->sites, "Call sites per list")->check(CLI::Range(1, 100))->capture_default_str();
  return [options] { return watch(*options); };
}

}  // namespace gmt::cli
