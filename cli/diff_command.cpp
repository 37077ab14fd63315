// `gpumemtrace diff base.db new.db`: compare two runs for CI (analysis/model/diff.h): peak, leaks per call stack
// and growth findings, exit 1 on a regression when asked; as text, JSON or an HTML page (render_export.h).
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "analysis/model/analyze.h"
#include "analysis/model/diff.h"
#include "analysis/model/report.h"
#include "analysis/read/salvage.h"
#include "analysis/read/trace_file.h"
#include "analysis/render/render_export.h"
#include "cli/ci_gates.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"

namespace gmt::cli {
namespace {

struct DiffCommandOptions {
  std::string base_path;
  std::string new_path;
  std::string format = "text";
  std::string output_path;
  bool fail_on_regression = false;
  analysis::DiffOptions diff;
  std::vector<std::string> suppression_files;
};

// "5%" or a size ("1MiB", "4096"); throws CLI::ValidationError.
void parse_threshold(const std::string& text, analysis::DiffOptions& options) {
  if (!text.empty() && text.back() == '%') {
    double percent = -1;
    if (!CLI::detail::lexical_cast(text.substr(0, text.size() - 1), percent) || !(percent >= 0)) {
      throw CLI::ValidationError("--threshold", "'" + text + "' is not a percentage such as 5%");
    }
    options.threshold_percent = percent;
    return;
  }
  std::string bytes_text = text;
  CLI::AsSizeValue as_size(true);
  uint64_t bytes = 0;
  bool valid = false;
  try {
    valid = as_size(bytes_text).empty() && CLI::detail::lexical_cast(bytes_text, bytes);
  } catch (const CLI::Error&) {
    valid = false;  // CLI11 throws for an unknown unit; the message below names the option
  }
  if (!valid) {
    throw CLI::ValidationError("--threshold",
                               "'" + text + "' is neither a size (4096, 64KiB, 1MiB) nor a percentage (5%)");
  }
  options.threshold_bytes = bytes;
}

std::optional<analysis::Report> analyze(const std::string& path, const analysis::SuppressionSet& suppressions) {
  try {
    analysis::AnalyzeOptions options;
    if (!suppressions.rules.empty()) options.suppressions = &suppressions;
    analysis::Report report = analysis::analyze_trace_file(path, options);  // salvaged when damaged
    if (report.trace.salvaged) fmt::print(stderr, "gpumemtrace: warning: '{}': {}\n", path, *report.trace.salvaged);
    return report;
  } catch (const analysis::TraceError& e) {
    fmt::print(stderr, "gpumemtrace: {}\n", e.what());
    return std::nullopt;
  }
}

int run_diff(const DiffCommandOptions& options) {
  std::optional<analysis::SuppressionSet> suppressions = load_suppression_files(options.suppression_files);
  if (!suppressions) return kExitBadInput;
  try {
    std::optional<analysis::Report> base = analyze(options.base_path, *suppressions);
    if (!base) return kExitBadInput;
    std::optional<analysis::Report> next = analyze(options.new_path, *suppressions);
    if (!next) return kExitBadInput;
    for (const analysis::Report* report : {&*base, &*next}) {
      if (!report->trace.complete) {
        fmt::print(stderr,
                   "gpumemtrace: warning: '{}' is incomplete (the process crashed, was killed or is still "
                   "running): memory live at its end was not necessarily leaked\n",
                   report->trace.path);
      }
    }

    analysis::TraceDiff diff = analysis::diff_reports(*base, *next, options.diff);
    std::string text = options.format == "json"   ? analysis::render_diff_json(diff)
                       : options.format == "html" ? analysis::render_diff_html(diff, *base, *next)
                                                  : analysis::render_diff_text(diff);
    if (options.output_path.empty()) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    } else {
      std::ofstream out(options.output_path, std::ios::binary | std::ios::trunc);
      if (out) out << text;
      out.close();
      if (!out) {
        fmt::print(stderr, "gpumemtrace: cannot write the diff to '{}'\n", options.output_path);
        return kExitBadInput;
      }
    }
    if (options.fail_on_regression && !diff.regressions.empty()) {
      fmt::print(stderr, "gpumemtrace: --fail-on-regression failed: {} regression{}; first: {}\n",
                 diff.regressions.size(), diff.regressions.size() == 1 ? "" : "s", diff.regressions.front());
      return kExitFindings;
    }
    return kExitOk;
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpumemtrace: internal error while comparing '{}' and '{}': {}\n", options.base_path,
               options.new_path, e.what());
    return kExitInternal;
  }
}

}  // namespace

CommandAction add_diff_command(CLI::App& app) {
  auto options = std::make_shared<DiffCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "diff", "Compare two traces of the same program (e.g. main against a change): peak (total and per device), "
              "leaks per call stack (matched by function, file and line, not by address) and growth findings.");
  command->add_option("base", options->base_path, "The trace to compare against")->required()->type_name("BASE");
  command->add_option("new", options->new_path, "The trace under test")->required()->type_name("NEW");
  command
      ->add_option("--format", options->format,
                   "Output format: text for people, json for scripts, html for a page with both runs' memory over "
                   "time and the stacks that changed (one file, opens offline)")
      ->check(CLI::IsMember({"text", "json", "html"}))
      ->capture_default_str();
  command->add_option("-o,--output", options->output_path, "Write the diff to FILE instead of stdout")
      ->type_name("FILE");
  command->add_flag("--fail-on-regression", options->fail_on_regression,
                    "Exit 1 on a regression: a new leak stack, a leak or the leaked total grown beyond the "
                    "threshold, a peak grown beyond the threshold, a new growth finding");
  command
      ->add_option_function<std::string>(
          "--threshold", [options](const std::string& text) { parse_threshold(text, options->diff); },
          "Growth allowed before it is a regression: a SIZE (4096, 64KiB, 1MiB) or a percentage of the base "
          "(5%); default 0: any growth")
      ->type_name("SIZE|N%");
  add_suppression_option(*command, options->suppression_files);
  command->footer("Examples:\n"
                  "  gpumemtrace diff base.db new.db                         what changed, as text\n"
                  "  gpumemtrace diff base.db new.db --fail-on-regression    exit 1 on any regression\n"
                  "  gpumemtrace diff base.db new.db --fail-on-regression --threshold 5%\n"
                  "                                                          allow 5% more peak and leaked bytes\n"
                  "  gpumemtrace diff base.db new.db --format json -o diff.json --suppressions known.supp\n"
                  "  gpumemtrace diff base.db new.db --format html -o diff.html  open in a browser\n"
                  "\n"
                  "Exit status: 0 when the diff was written (and, with --fail-on-regression, nothing regressed),\n"
                  "1 when --fail-on-regression found a regression, 2 when a trace or a suppressions file cannot be\n"
                  "read (or an option is wrong), 3 on an internal error.\n");
  return [options] { return run_diff(*options); };
}

}  // namespace gmt::cli
