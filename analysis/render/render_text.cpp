// The text report: what a CUDA engineer reads in a terminal. Order: what was profiled and how far to trust
// it, the totals, the peak, the leaks by call stack, the failed allocations, then what was left out.
#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <iterator>

#include "analysis/format.h"
#include "analysis/model/allocators.h"
#include "analysis/model/findings.h"
#include "analysis/model/stack_view.h"
#include "analysis/read/trace_tables.h"
#include "analysis/render/render.h"
#include "analysis/render/render_ci.h"
#include "analysis/render/render_text_parts.h"

namespace gmt::analysis {
namespace {

std::string plural(uint64_t count, const char* singular, const char* plural_form) {
  return fmt::format("{} {}", count, count == 1 ? singular : plural_form);
}

template <typename Enum>
std::string join_names(const std::vector<Enum>& values) {
  std::string joined;
  for (Enum value : values) {
    if (!joined.empty()) joined += ", ";
    joined += schema::to_string(value);
  }
  return joined;
}

// "at 1.204 s" for one allocation, "from 0.100 s to 2.300 s" when a group spans time: a group whose
// allocations keep coming is a leak that grows with the run.
std::string time_span(int64_t first_ns, int64_t last_ns) {
  if (first_ns == last_ns) return fmt::format("at {}", format_duration(first_ns));
  return fmt::format("from {} to {}", format_duration(first_ns), format_duration(last_ns));
}

void append_stack(std::string& out, const Stack& stack, const RenderOptions& options) {
  if (stack.id == 0) {
    out += "    (no call stack was recorded for this allocation)\n";
    return;
  }
  if (stack.missing) {
    out += fmt::format("    (call stack {} is missing from the trace)\n", stack.id);
    return;
  }
  if (stack.frames.empty()) {
    out += "    (empty call stack)\n";
    return;
  }
  const StackViewOptions view{
      .max_lines = options.max_frames, .full_stacks = options.full_stacks, .full_names = options.full_names};
  for (const std::string& line : stack_view_lines(stack, view)) {
    out += (line.rfind("...", 0) == 0 ? "    " : "    at ") + line + "\n";
  }
}

void append_header(std::string& out, const TraceInfo& trace) {
  out += fmt::format("gpumemtrace report for {}\n", trace.command_line.value_or("(command line not recorded)"));
  out += fmt::format("  trace      {} (schema {}, {})\n", trace.path, trace.schema_version,
                     plural(trace.event_count, "event", "events"));
  if (trace.pid) out += fmt::format("  pid        {}\n", *trace.pid);
  out += fmt::format("  duration   {}{}\n", format_duration(trace.duration_ns),
                     trace.duration_from_events ? " (up to the last recorded event)" : "");
  if (auto exit = app_exit_text(trace)) out += fmt::format("  app        {}\n", *exit);
  if (trace.simulated) out += "  runtime    simulated CUDA runtime (no GPU was used)\n";
  if (trace.block_stack_sample_bytes > 0) {
    const std::string size = format_bytes(trace.block_stack_sample_bytes);
    out += fmt::format("  stacks     sampled for tensor blocks (--sample-block-stacks {0}): every block of {0} or more "
                       "has\n             its stack, smaller ones one per {0} allocated on average; every block is "
                       "counted\n",
                       size);
  }
  // Only when the choice of backend had something to say (a fallback, and why).
  if (trace.backend_note) out += fmt::format("  backend    {}: {}\n", trace.backend.value_or("?"), *trace.backend_note);
  if (!trace.complete) {
    out += fmt::format("warning: the trace is incomplete: {}.\n", incomplete_reason(trace));
    out += "         Memory live at the end of the trace was not necessarily leaked.\n";
  }
  for (const std::string& note : trace.missing_tables) out += "warning: " + note + ".\n";
  const bool no_symbols_table = std::find(trace.missing_tables.begin(), trace.missing_tables.end(),
                                          missing_table_note("symbols")) != trace.missing_tables.end();
  if (!trace.symbolized && !no_symbols_table) {
    out += fmt::format("warning: the trace is not symbolized: frames show addresses only (gpumemtrace symbolize {}).\n",
                       trace.path);
  }
  if (trace.recording_pauses > 0 && !trace.control_pause_starts_ns.empty()) {
    out += fmt::format("warning: recording was paused {} for {} in all (run --paused, gpumemtrace ctl pause): what "
                       "happened then is missing.\n",
                       plural(trace.recording_pauses, "time", "times"),
                       format_duration(static_cast<int64_t>(trace.recording_paused_ns)));
    if (trace.unjudged_after_pause_allocations > 0) {
      out += fmt::format("         {}.\n", unjudged_after_pause_text(trace));
    }
  } else if (trace.recording_pauses > 0) {
    out += fmt::format("warning: recording was paused {} for {} in all (a benchmark's gmt_set_recording_paused):\n"
                       "         what happened then is missing; a block freed during a pause may be shown as live.\n",
                       plural(trace.recording_pauses, "time", "times"),
                       format_duration(static_cast<int64_t>(trace.recording_paused_ns)));
  }
  if (trace.frees_after_close > 0) out += fmt::format("warning: {}.\n", frees_after_close_text(trace));
  if (trace.dropped_events > 0) {
    out += fmt::format("warning: {} lost while recording: the numbers below may be too low.\n",
                       plural(trace.dropped_events, "event was", "events were"));
  }
}

void append_totals(std::string& out, const Report& report, const RenderOptions& options) {
  const Totals& totals = report.totals;
  out += "\nTotals\n";
  out +=
      fmt::format("  allocations         {} ({} in total)\n", totals.allocations, format_bytes(totals.allocated_bytes));
  out += fmt::format("  frees               {}\n", totals.frees);
  out += fmt::format("  failed allocations  {}\n", totals.failed_allocations);
  out += fmt::format("  leaked              {} in {}\n", format_bytes_exact(totals.leaked_bytes),
                     plural(totals.leaked_allocations, "allocation", "allocations"));
  append_cached_at_exit(out, report);  // framework heaps: render_text_heaps.cpp
  if (totals.unmatched_frees > 0) {
    out += fmt::format("  unmatched frees     {} (addresses that were not live: double frees, or memory "
                       "allocated before recording started)\n",
                       totals.unmatched_frees);
  }
  if (totals.inconsistencies > 0) {
    out += fmt::format("  inconsistencies     {} (records that cannot be right, e.g. a live address "
                       "allocated again or a negative size)\n",
                       totals.inconsistencies);
  }

  out += fmt::format("\nPeak live memory: {}", format_bytes_exact(totals.peak_bytes));
  if (totals.peak_bytes > 0) out += fmt::format(" at {}", format_duration(totals.peak_time_ns));
  out += "\n";
  // The kinds that held memory only: "managed 0 B, host pinned 0 B" says nothing.
  const auto& peak = report.peak_by_kind;
  std::string kinds;
  const std::pair<const char*, uint64_t> by_kind[] = {{"device", peak.device},
                                                      {"managed", peak.managed},
                                                      {"host pinned", peak.host_pinned},
                                                      {"VMM physical", peak.vmm_physical}};
  size_t held = 0;
  for (const auto& [name, bytes] : by_kind) {
    if (bytes == 0) continue;
    kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", name, format_bytes(bytes));
    ++held;
  }
  if (held > 1) out += "  peak of each kind: " + kinds + "\n";
  append_peak_over_time(out, report, options);
}

void append_leaks(std::string& out, const Report& report, const RenderOptions& options) {
  if (report.totals.leaked_allocations == 0) {
    out += no_leaks_verdict(report);
    return;
  }
  if (report.leaks.empty()) {
    out += fmt::format("\nNo leak group reaches --min-bytes {}.\n", format_bytes_exact(report.min_bytes.value_or(0)));
    return;
  }
  const size_t shown = std::min(options.top, report.leaks.size());
  out += fmt::format("\nLeaks by call stack ({}, largest first)\n", plural(report.leaks.size(), "group", "groups"));
  for (size_t i = 0; i < shown; ++i) {
    const LeakGroup& group = report.leaks[i];
    out += fmt::format("\n#{} {} in {} ({}, {}) {}\n", i + 1, format_bytes(group.bytes),
                       plural(group.count, "allocation", "allocations"), join_names(group.apis),
                       join_names(group.memory_kinds), time_span(group.first_alloc_ns, group.last_alloc_ns));
    out += user_line_note(group.stack);
    if (group.backward_stack_id == kBackwardCallerUnknown) {
      out += "    made by autograd's worker threads during backward(), while several backward() calls ran\n";
    } else if (group.backward_stack_id > 0) {
      const Frame* caller = user_frame(group.backward_stack);
      out += fmt::format("    made by autograd's worker threads during backward() at {}\n",
                         caller ? frame_label(*caller) : one_line_stack(group.backward_stack));
    }
    if (const std::string unsampled = unsampled_stack_text(report.trace, group); !unsampled.empty()) {
      out += "    " + unsampled + "\n";
    } else {
      append_stack(out, group.stack, options);
    }
  }
}

// The allocators the leaked memory came through, with what their cache means (analysis/model/allocators.h).
void append_allocators(std::string& out, const Report& report) {
  for (const AllocatorFinding& allocator : name_allocators(report.leaks)) {
    out += fmt::format("\nAllocator: {} ({} in {} of the leak groups above)\n  {}\n", allocator.name,
                       format_bytes(allocator.leaked_bytes), allocator.leak_groups, allocator.advice);
  }
}

void append_failures(std::string& out, const Report& report, const RenderOptions& options) {
  if (report.failures.empty()) return;
  // A retry loop can fail thousands of times; the first few tell the story, the JSON keeps them all.
  const size_t shown = std::min(options.top, report.failures.size());
  out += fmt::format("\nFailed allocations ({})\n", report.failures.size());
  for (size_t i = 0; i < shown; ++i) {
    const AllocFailure& failure = report.failures[i];
    std::string where = failure.device >= 0 ? fmt::format("device {}", failure.device) : std::string("the host");
    out += fmt::format("\n{} of {} on {} failed at {}: {} ({})\n", schema::to_string(failure.api),
                       format_bytes_exact(failure.requested_bytes), where, format_duration(failure.time_ns),
                       cuda_error_name(failure.error), failure.error);
    if (failure.device_free) {
      out += fmt::format("    device free at that moment: {}",
                         format_bytes_exact(static_cast<uint64_t>(std::max<int64_t>(0, *failure.device_free))));
      if (failure.device_total && *failure.device_total > 0) {
        out += fmt::format(" of {}", format_bytes(static_cast<uint64_t>(*failure.device_total)));
      }
      out += "\n";
    }
    append_failure_label(out, failure);
    append_failure_attempts(out, failure);
    append_stack(out, failure.stack, options);
    append_failure_forensics(out, failure, options);
  }
  if (shown < report.failures.size()) {
    out += fmt::format("\n... {} not shown (--format json lists them all)\n",
                       plural(report.failures.size() - shown, "more failed allocation", "more failed allocations"));
  }
}

void append_not_shown(std::string& out, const Report& report, const RenderOptions& options) {
  const size_t shown = std::min(options.top, report.leaks.size());
  if (shown < report.leaks.size()) {
    uint64_t bytes = 0;
    uint64_t count = 0;
    for (auto it = report.leaks.begin() + static_cast<std::ptrdiff_t>(shown); it != report.leaks.end(); ++it) {
      bytes += it->bytes;
      count += it->count;
    }
    out += fmt::format("\n{} ({} in {}) not shown: use --top {} to see all.\n",
                       plural(report.leaks.size() - shown, "more leak group", "more leak groups"), format_bytes(bytes),
                       plural(count, "allocation", "allocations"), report.leaks.size());
  }
  if (report.leak_groups_below_min_bytes > 0) {
    out += fmt::format("\n{} ({} in total) below --min-bytes {} not shown.\n",
                       plural(report.leak_groups_below_min_bytes, "leak group", "leak groups"),
                       format_bytes(report.leaked_bytes_below_min_bytes),
                       format_bytes_exact(report.min_bytes.value_or(0)));
  }
}

}  // namespace

void append_call_stack(std::string& out, const Stack& stack, const RenderOptions& options) {
  append_stack(out, stack, options);
}

// The answer first (analysis/model/findings.h): each finding a verdict, the user's line and what lies under it.
void append_findings(std::string& out, const Report& report, const RenderOptions& options) {
  const std::vector<Finding> findings = findings_of(report);
  if (findings.empty()) {
    // Never a clean verdict from a trace that may be missing events.
    if (!supports_verdict(report.trace)) {
      out += "\nFindings: none seen, but the trace may be missing events (see the warning above).\n";
    } else if (report.totals.allocations == 0) {
      out += "\nFindings: none: the trace recorded no allocations.\n";
    } else {
      out += "\nFindings: none: nothing was held at exit, nothing grew steadily, no allocation failed.\n";
    }
    return;
  }
  out += "\nFindings, largest first\n";
  const size_t shown = std::min(findings.size(), options.top);
  for (size_t i = 0; i < shown; ++i) {
    const Finding& finding = findings[i];
    out += fmt::format("  {}. {}\n", i + 1, finding.verdict);
    if (!finding.user_frame.empty()) out += fmt::format("       at {}\n", finding.user_frame);
    if (!finding.during.empty()) out += fmt::format("       {}\n", finding.during);
    if (!finding.source_text.empty()) out += fmt::format("          | {}\n", finding.source_text);
    if (!finding.via.empty()) out += fmt::format("       via {}\n", finding.via);
    if (!finding.detail.empty()) out += fmt::format("       ({})\n", finding.detail);
  }
  if (findings.size() > shown) {
    out += fmt::format("  ... {} (--top N shows more)\n",
                       plural(findings.size() - shown, "more finding", "more findings"));
  }
}

std::string render_text(const Report& report, const RenderOptions& options) {
  std::string out;
  append_header(out, report.trace);
  append_aggregate_note(out, report);
  append_devices(out, report);
  append_findings(out, report, options);
  append_cross_check(out, report, options);
  append_filters(out, report);
  append_totals(out, report, options);
  append_leaks(out, report, options);
  append_imported(out, report, options);
  append_allocators(out, report);
  append_suppressed(out, report);  // CI sections: render_ci.cpp
  append_growth(out, report, options);
  append_ranges(out, report, options);
  append_tensor_blocks(out, report, options);
  append_heap_fragmentation(out, report, options);  // render_text_pools.cpp
  append_failures(out, report, options);
  append_allocator_ooms(out, report, options);
  append_pools(out, report);
  append_allocator_stats(out, report);
  append_breakdown(out, report);
  append_not_shown(out, report, options);
  return out;
}

}  // namespace gmt::analysis
