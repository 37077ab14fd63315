// The report's sentences about the trace as a whole (report.h), in every renderer's words.
#include "analysis/model/report.h"

#include <cstring>

#include <fmt/core.h>

#include "analysis/format.h"

namespace gmt::analysis {

std::optional<std::string> app_exit_text(const TraceInfo& trace) {
  if (trace.app_exit_signal) {
    const char* name = strsignal(static_cast<int>(*trace.app_exit_signal));
    return "killed by signal " + std::to_string(*trace.app_exit_signal) + (name ? std::string(" (") + name + ")" : "");
  }
  if (trace.app_exit_status) return "exited with code " + std::to_string(*trace.app_exit_status);
  return std::nullopt;
}

std::string frees_after_close_text(const TraceInfo& trace) {
  if (trace.frees_after_close == 0) return {};
  const uint64_t n = trace.frees_after_close;
  return fmt::format("{} after the trace was closed at exit (by a library finalized after gpumemtrace's), so up to {} "
                     "listed as leaked may have been freed",
                     n == 1 ? "1 free came" : fmt::format("{} frees came", n),
                     n == 1 ? "1 allocation" : fmt::format("{} allocations", n));
}

std::string unjudged_after_pause_text(const TraceInfo& trace) {
  if (trace.unjudged_after_pause_allocations == 0) return {};
  const uint64_t n = trace.unjudged_after_pause_allocations;
  return fmt::format("{} ({}) alive when recording was paused (gpumemtrace ctl pause) {} never seen freed: {} may "
                     "have been freed while paused, so {} left out of the leaks",
                     n == 1 ? "1 allocation" : fmt::format("{} allocations", n),
                     format_bytes(trace.unjudged_after_pause_bytes), n == 1 ? "was" : "were", n == 1 ? "it" : "they",
                     n == 1 ? "it is" : "they are");
}

std::string no_leaks_sentence(const Report& report) {
  if (report.totals.allocations == 0) {
    // Incomplete: the process may well have allocated, only nothing of it was written.
    return supports_verdict(report.trace) ? "recorded no allocations"
                                          : "no allocation reached the trace, which is incomplete: no verdict";
  }
  if (!supports_verdict(report.trace)) {
    return report.trace.complete ? "no leaks among the recorded allocations, but events were lost: no verdict"
                                 : "no leaks among the recorded allocations, but the trace is incomplete: no verdict";
  }
  if (!leak_verdict_complete(report)) {
    if (!listed_leaks_exact(report)) {
      return "no leak among the recorded blocks, but not every block was recorded: no verdict";
    }
    return "no leaks outside JAX/XLA's preallocated arena; no verdict on JAX's buffers in it";
  }
  return "no leaks: every allocation was freed";
}

}  // namespace gmt::analysis
