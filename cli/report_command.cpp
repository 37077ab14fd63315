// `gpumemtrace report`: analyze a trace and print leaks by call stack, the peak and the totals.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "analysis/model.h"
#include "analysis/render.h"
#include "analysis/trace_file.h"
#include "cli/ci_gates.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/merged_report.h"
#include "cli/progress.h"
#include "cli/report_formats.h"

namespace gmt::cli {
namespace {

struct ReportOptions {
  std::vector<std::string> inputs;  // one trace; several, or a directory: the merged report
  std::string trace_path;
  std::string format = "text";
  size_t top = 10;
  std::string output_path;  // empty: stdout
  uint64_t min_bytes = 0;   // 0: no filter
  std::string folded_of = "leaks";
  ReportGates gates;        // CI: cli/ci_gates.h
};

int write_output(const std::string& text, const std::string& output_path) {
  if (output_path.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return kExitOk;
  }
  std::ofstream out(output_path, std::ios::binary | std::ios::trunc);
  if (out) out << text;
  out.close();
  if (!out) {
    fmt::print(stderr, "gpumemtrace: cannot write the report to '{}'\n", output_path);
    return kExitBadInput;
  }
  return kExitOk;
}

int run_report(const ReportOptions& options) {
  // Before the trace: a bad suppressions file is a bad option, whatever the trace holds.
  std::optional<analysis::SuppressionSet> suppressions = load_suppression_files(options.gates.suppression_files);
  if (!suppressions) return kExitBadInput;
  try {
    auto trace = analysis::TraceFile::open(options.trace_path);
    analysis::AnalyzeOptions analyze_options;
    if (!suppressions->rules.empty()) analyze_options.suppressions = &*suppressions;
    if (options.min_bytes > 0) analyze_options.min_bytes = options.min_bytes;
    analyze_options.top_stacks = options.top;  // call stacks kept per moment (peak, growth, failures)
    Progress progress("analyzing " + options.trace_path);
    if (progress.enabled()) {
      analyze_options.progress = [&](uint64_t read, uint64_t estimated) { progress.update(read, estimated, "events"); };
    }
    analysis::Report report = analysis::analyze_trace(trace, analyze_options);
    progress.finish();

    // On stderr as well as in the report: with --format json or -o, the report itself may not be read by a
    // person, and leaks in an unfinished trace are only "live at the end".
    if (!report.trace.complete) {
      fmt::print(stderr,
                 "gpumemtrace: warning: '{}' is incomplete (the process crashed, was killed or is still "
                 "running): memory live at the end was not necessarily leaked\n",
                 options.trace_path);
    }

    analysis::RenderOptions render_options;
    render_options.top = options.top;
    std::string text = render_report(report, options.format, render_options, options.folded_of);
    if (int written = write_output(text, options.output_path); written != kExitOk) return written;
    return check_gates(report, options.gates);
  } catch (const analysis::TraceError& e) {
    fmt::print(stderr, "gpumemtrace: {}\n", e.what());
    return kExitBadInput;
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpumemtrace: internal error while reading '{}': {}\n", options.trace_path, e.what());
    return kExitInternal;
  }
}

}  // namespace

CommandAction add_report_command(CLI::App& app) {
  auto options = std::make_shared<ReportOptions>();
  CLI::App* command = app.add_subcommand(
      "report",
      "Analyze a trace: memory still allocated at exit grouped by the call stack that allocated it "
      "(largest first), the peak of live GPU memory and what was live then, live memory over time, steady "
      "growth, fragmentation, failed allocations labelled out-of-memory or fragmentation, totals "
      "(docs/analysis.md defines each).");
  command->add_option("trace", options->inputs,
                      "Trace file written by `gpumemtrace run`; several traces, or a directory of them, give one "
                      "merged report over the processes (ranks) of a job")
      ->required()
      ->type_name("TRACE");
  command
      ->add_option("--format", options->format,
                   "Output format: text for people, json for scripts, html (one self-contained page with plots), "
                   "perfetto (Chrome trace-event JSON for ui.perfetto.dev), folded (stacks for flamegraph.pl)")
      ->check(CLI::IsMember(report_formats()))
      ->capture_default_str();
  command
      ->add_option("--folded-of", options->folded_of,
                   "With --format folded: weigh stacks by leaked bytes, or by bytes live at each device's peak")
      ->check(CLI::IsMember(folded_weights()))
      ->capture_default_str();
  command->add_option("--top", options->top,
                      "Show the N largest leak groups (and failed allocations); keep N call stacks per moment "
                      "(peak, growth, failure) in the JSON report")
      ->check(CLI::Range(size_t{1}, size_t{1'000'000}))
      ->type_name("N")
      ->capture_default_str();
  command->add_option("-o,--output", options->output_path, "Write the report to FILE instead of stdout")
      ->type_name("FILE");
  command
      ->add_option("--min-bytes", options->min_bytes,
                   "Hide leak groups smaller than SIZE in total (totals still count them); "
                   "units: 4096, 64KiB, 1MiB, 1MB=1000000")
      ->transform(CLI::AsSizeValue(true))
      ->type_name("SIZE");
  add_gate_options(*command, options->gates);
  command->footer(
      "Examples:\n"
      "  gpumemtrace report trace.db                        leaks, peak and totals as text\n"
      "  gpumemtrace report trace.db --top 3                only the 3 largest leak groups\n"
      "  gpumemtrace report trace.db --min-bytes 1MiB       ignore leak groups under 1 MiB\n"
      "  gpumemtrace report trace.db --format json -o r.json   for scripts and CI checks\n"
      "  gpumemtrace report traces/                         one merged report over every *.db of a job:\n"
      "  gpumemtrace report trace.0.db trace.1.db           per-process peaks and leaks, imbalance, outlier rank\n"
      "  gpumemtrace report trace.db --format html -o r.html   one page with plots; opens offline\n"
      "  gpumemtrace report trace.db --format perfetto -o t.json   load in ui.perfetto.dev\n"
      "  gpumemtrace report trace.db --format folded | flamegraph.pl > leaks.svg\n"
      "  gpumemtrace report trace.db --format folded --folded-of peak   stacks live at the peak\n"
      "\n" +
      std::string(kGateHelp) +
      "\n"
      "Exit status: 0 when the report was written (leaks or not, unless a gate failed), 1 when a\n"
      "--fail-on-leak or --fail-on-growth gate failed, 2 when the trace or a suppressions file cannot be\n"
      "read (or an option is wrong), 3 on an internal error.\n"
      "A trace of a process that crashed or is still running is reported too, with a warning: memory\n"
      "live at its end is not necessarily leaked.\n"
      "A merged report skips a trace it cannot read, names it on stderr and exits with 2 after writing the\n"
      "report over the others (docs/analysis.md, \"Merged report\", defines the outlier rule).\n");
  return [options] {
    if (wants_merged_report(options->inputs)) {
      if (options->min_bytes > 0) {
        fmt::print(stderr, "gpumemtrace: --min-bytes applies to the report of one trace, not to a merged report\n");
        return kExitBadInput;
      }
      if (options->format != "text" && options->format != "json") {
        fmt::print(stderr, "gpumemtrace: --format {} applies to the report of one trace; a merged report is text or json\n",
                   options->format);
      if (const char* gate = gate_option_given(options->gates)) {
        fmt::print(stderr, "gpumemtrace: {} applies to the report of one trace, not to a merged report\n", gate);
        return kExitBadInput;
      }
      return run_merged_report({options->inputs, options->format, options->top, options->output_path});
    }
    options->trace_path = options->inputs.front();
    return run_report(*options);
  };
}

}  // namespace gmt::cli
