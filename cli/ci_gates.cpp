#include "cli/ci_gates.h"

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <algorithm>

#include "analysis/format.h"
#include "analysis/model/verify.h"
#include "cli/exit_codes.h"

namespace gmt::cli {

const char* const kGateHelp =
    "CI gates (the report is written first; stderr says which gate failed and by how much):\n"
    "  gpumemtrace report trace.db --fail-on-leak             exit 1 on any leak\n"
    "  gpumemtrace report trace.db --fail-on-leak=1MiB        exit 1 when more than 1 MiB leaked\n"
    "  gpumemtrace report trace.db --fail-on-growth           exit 1 on a steady-growth finding\n"
    "  gpumemtrace report trace.db --fail-on-disagreement     exit 1 when run --verify's backends disagree on\n"
    "      any event (or could not compare); exit 2 on a trace not recorded with run --verify\n"
    "  gpumemtrace report trace.db --suppressions known.supp --fail-on-leak\n"
    "  A gate exits 4 instead of judging a trace that is incomplete (the app was killed or crashed, recording\n"
    "  stopped early), lost events (what it missed may be the leak) or had frees after it was closed at exit (a\n"
    "  library finalized after ours: a listed leak may have been freed). --allow-incomplete judges what it holds.\n"
    "      known.supp: lines leak:FUNCTION, leak-module:MODULE, leak-file:FILE (globs with * and ?), # comments\n";

void add_suppression_option(CLI::App& command, std::vector<std::string>& files) {
  command
      .add_option("--suppressions", files,
                  "Leave known leaks out of the leaks and the leak totals: FILE of lines leak:FUNCTION, "
                  "leak-module:MODULE, leak-file:FILE (globs); repeatable; docs/analysis.md")
      ->type_name("FILE")
      ->allow_extra_args(false);  // `--suppressions a.supp trace.db`: the trace is not a second file
}

void add_gate_options(CLI::App& command, ReportGates& gates) {
  command
      .add_option_function<std::string>(
          "--fail-on-leak",
          [&gates](const std::string& size) {
            uint64_t bytes = 0;
            if (!CLI::detail::lexical_cast(size, bytes)) throw CLI::ValidationError("--fail-on-leak", size);
            gates.fail_on_leak = bytes;
          },
          "Exit 1 when more than SIZE bytes leaked after suppressions (default 0: any leak); "
          "write it --fail-on-leak=SIZE")
      ->expected(0, 1)
      ->default_str("0")
      ->transform(CLI::AsSizeValue(true))
      ->type_name("[=SIZE]");
  command.add_flag("--fail-on-growth", gates.fail_on_growth, "Exit 1 when the report has a steady-growth finding");
  command.add_flag("--fail-on-disagreement", gates.fail_on_disagreement,
                   "For a trace of run --verify: exit 1 when one backend saw an allocation, free or VMM/pool call "
                   "that the other did not, or when the cross-check could not run");
  command.add_flag("--allow-incomplete", gates.allow_incomplete,
                   "Let the gates judge an incomplete trace (or one with lost events) by the events it holds; "
                   "without it such a trace exits 4, never passes");
  add_suppression_option(command, gates.suppression_files);
}

std::optional<analysis::SuppressionSet> load_suppression_files(const std::vector<std::string>& files) {
  try {
    return analysis::load_suppressions(files);
  } catch (const analysis::SuppressionError& e) {
    fmt::print(stderr, "gpumemtrace: {}\n", e.what());
    return std::nullopt;
  }
}

const char* gate_option_given(const ReportGates& gates) {
  if (gates.fail_on_leak) return "--fail-on-leak";
  if (gates.fail_on_growth) return "--fail-on-growth";
  if (gates.fail_on_disagreement) return "--fail-on-disagreement";
  if (!gates.suppression_files.empty()) return "--suppressions";
  return nullptr;
}

int check_gates_apply(const analysis::Report& report, const ReportGates& gates) {
  if (gates.fail_on_disagreement && !report.cross_check) {
    fmt::print(stderr,
               "gpumemtrace: --fail-on-disagreement: '{}' was not recorded with `gpumemtrace run --verify`: "
               "it holds one backend's events, nothing to cross-check\n",
               report.trace.path);
    return kExitBadInput;
  }
  return kExitOk;
}

// A gate on a trace that cannot support a verdict: refused, so that a killed run never passes CI as clean.
static bool refuse_incomplete(const analysis::Report& report, const ReportGates& gates) {
  bool gate = gates.fail_on_leak || gates.fail_on_growth || gates.fail_on_disagreement;
  if (!gate || gates.allow_incomplete || analysis::supports_verdict(report.trace)) return false;
  const analysis::TraceInfo& trace = report.trace;
  std::string why = !trace.complete ? fmt::format("it is incomplete ({})", analysis::incomplete_reason(trace))
                    : trace.dropped_events > 0    ? fmt::format("{} event{} lost", trace.dropped_events,
                                                             trace.dropped_events == 1 ? " was" : "s were")
                    : trace.frees_after_close > 0 ? analysis::frees_after_close_text(trace)
                                                  : analysis::unjudged_after_pause_text(trace);
  fmt::print(stderr, "gpumemtrace: {}: no verdict on '{}': {}; --allow-incomplete judges the events it holds\n",
             gate_option_given(gates), trace.path, why);
  return true;
}

int check_gates(const analysis::Report& report, const ReportGates& gates) {
  if (refuse_incomplete(report, gates)) return kExitIncompleteTrace;
  int exit_code = kExitOk;
  if (gates.fail_on_disagreement && report.cross_check) {
    const analysis::CrossCheck& check = *report.cross_check;
    if (!check.ran()) {
      fmt::print(stderr, "gpumemtrace: --fail-on-disagreement failed: the cross-check did not run: {}\n",
                 check.unavailable.value_or("the trace does not say why"));
      exit_code = kExitFindings;
    } else if (check.disagreements() > 0) {
      fmt::print(stderr,
                 "gpumemtrace: --fail-on-disagreement failed: {} event{} seen by only one backend ({} only by "
                 "{}, {} only by {}; {} matched)\n",
                 check.disagreements(), check.disagreements() == 1 ? "" : "s", check.only_counting,
                 check.counting_backend, check.only_checking, check.checking_backend, check.matched);
      exit_code = kExitFindings;
    }
  }
  const analysis::Totals& totals = report.totals;
  if (gates.fail_on_leak && totals.leaked_bytes > *gates.fail_on_leak) {
    fmt::print(stderr,
               "gpumemtrace: --fail-on-leak failed: {} leaked in {} allocation{} from {} ({} over the allowed {})\n",
               analysis::format_bytes_exact(totals.leaked_bytes), totals.leaked_allocations,
               totals.leaked_allocations == 1 ? "" : "s",
               report.leak_groups_total == 1 ? "1 call stack" : fmt::format("{} call stacks", report.leak_groups_total),
               analysis::format_bytes_exact(totals.leaked_bytes - *gates.fail_on_leak),
               analysis::format_bytes_exact(*gates.fail_on_leak));
    exit_code = kExitFindings;
  }
  // A heap whose blocks were not recorded, kept out of the leaks: what the app held in it is unknown, so the gate
  // cannot pass on it.
  uint64_t unknown_bytes = 0;
  for (const analysis::HeapAtExit& heap : report.heaps) {
    if (!heap.blocks_recorded && !heap.in_leaks) unknown_bytes += heap.reserved_bytes;
  }
  if (gates.fail_on_leak && totals.leaked_bytes <= *gates.fail_on_leak &&
      totals.leaked_bytes + unknown_bytes > *gates.fail_on_leak) {
    fmt::print(stderr,
               "gpumemtrace: --fail-on-leak failed: {} leaked, and {} reserved by framework allocators at "
               "exit whose blocks were not all recorded (what the app held in it is unknown)\n",
               analysis::format_bytes_exact(totals.leaked_bytes), analysis::format_bytes_exact(unknown_bytes));
    for (const analysis::HeapAtExit& heap : report.heaps) {  // JAX/XLA's arena: how to have its buffers recorded
      if (heap.opaque) fmt::print(stderr, "gpumemtrace:   {}: {}\n", heap.allocator, heap.note);
    }
    exit_code = kExitFindings;
  }
  if (gates.fail_on_growth && !report.growth.findings.empty()) {
    std::string devices;
    for (const analysis::GrowthFinding& finding : report.growth.findings) {
      if (!devices.empty()) devices += ", ";
      devices += finding.device >= 0 ? fmt::format("device {}", finding.device) : std::string("host memory");
      const uint64_t rise =
          finding.end_low_bytes > finding.start_low_bytes ? finding.end_low_bytes - finding.start_low_bytes : 0;
      devices += fmt::format(" grew {} at {}/s", analysis::format_bytes(rise),
                             analysis::format_bytes(static_cast<uint64_t>(std::max(0.0, finding.rate_bytes_per_s))));
    }
    fmt::print(stderr, "gpumemtrace: --fail-on-growth failed: {} growth finding{}: {}\n", report.growth.findings.size(),
               report.growth.findings.size() == 1 ? "" : "s", devices);
    exit_code = kExitFindings;
  }
  return exit_code;
}

}  // namespace gmt::cli
