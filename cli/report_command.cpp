// `gpumemtrace report`: analyze a trace and print leaks by call stack, the peak and the totals.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "analysis/model/aggregate_report.h"
#include "analysis/model/analyze.h"
#include "analysis/model/report.h"
#include "analysis/read/salvage.h"
#include "analysis/read/trace_file.h"
#include "analysis/render/render.h"
#include "analysis/render/render_whatif.h"
#include "analysis/replay/whatif.h"
#include "cli/ci_gates.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/merged_report.h"
#include "cli/progress.h"
#include "cli/report_formats.h"
#include "cli/snapshot_marks.h"

namespace gmt::cli {
namespace {

struct ReportOptions {
  std::vector<std::string> inputs;  // one trace; several, or a directory: the merged report
  std::string trace_path;
  std::string format = "text";
  size_t top = 10;
  size_t max_allocations = 20'000;  // single allocations in perfetto and html
  bool full_stacks = false;         // analysis/model/stack_view.h: no framework frames folded
  bool full_names = false;          // ... C++ names as recorded
  std::string output_path;          // empty: stdout
  uint64_t min_bytes = 0;           // 0: no filter
  std::string folded_of = "leaks";
  bool whatif = true;  // a PyTorch OOM's finding names the best allocator setting (--no-whatif: not replayed)
  // Filters (analysis/model/filters.h); the times as given, in seconds from the process start.
  std::optional<int64_t> device;
  std::string since;  // seconds, or a snapshot's name (cli/snapshot_marks.h)
  std::string until;
  std::string at;              // a snapshot's name: --until its time
  std::string since_snapshot;  // --since NAME: the name (since then holds its time)
  std::optional<int64_t> pid;
  std::optional<uint64_t> min_size;
  std::optional<std::string> range;
  ReportGates gates;  // CI: cli/ci_gates.h
};

// "1.5" (seconds from the process start) as nanoseconds; nullopt, with a message, when it is not one.
std::optional<int64_t> parse_seconds(const std::string& text, const char* option) {
  double seconds = 0;
  size_t used = 0;
  try {
    seconds = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !std::isfinite(seconds) || seconds < 0 || seconds > 1e9) {
    fmt::print(stderr, "gpumemtrace: {} '{}' is not a time: give seconds from the process start, e.g. 1.5\n", option,
               text);
    return std::nullopt;
  }
  return static_cast<int64_t>(std::llround(seconds * 1e9));
}

bool has_filters(const ReportOptions& options) {
  return options.device || !options.since.empty() || !options.until.empty() || !options.at.empty() || options.pid ||
         options.min_size || options.range;
}

// The filters of the options; false (after saying why) when one of them is malformed.
bool filters_from_options(const ReportOptions& options, analysis::EventFilters& filters) {
  filters.device = options.device;
  filters.pid = options.pid;
  filters.min_size = options.min_size;
  filters.range = options.range;
  if (!options.at.empty()) filters.until_snapshot = options.at;
  if (!options.since_snapshot.empty()) filters.since_snapshot = options.since_snapshot;
  if (!options.since.empty() && !(filters.since_ns = parse_seconds(options.since, "--since"))) return false;
  if (!options.until.empty() && !(filters.until_ns = parse_seconds(options.until, "--until"))) return false;
  if (filters.since_ns && filters.until_ns && *filters.until_ns < *filters.since_ns) {
    fmt::print(stderr, "gpumemtrace: --until {} is before --since {}\n", options.until, options.since);
    return false;
  }
  return true;
}

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

// --at NAME and --since NAME: the snapshot's time in the trace, as the seconds --until and --since take.
bool resolve_snapshot_names(ReportOptions& options) {
  if (!options.at.empty()) {
    if (!options.until.empty()) {
      fmt::print(stderr, "gpumemtrace: --at and --until both say where the report ends: give one\n");
      return false;
    }
    std::optional<std::string> seconds = snapshot_seconds(options.trace_path, options.at, "--at");
    if (!seconds) return false;
    options.until = *seconds;
  }
  if (!options.since.empty() && !looks_like_seconds(options.since)) {
    std::optional<std::string> seconds = snapshot_seconds(options.trace_path, options.since, "--since");
    if (!seconds) return false;
    options.since_snapshot = options.since;
    options.since = *seconds;
  }
  return true;
}

// A PyTorch OOM's finding names the allocator setting that would have avoided it: the what-if replay (gpumemtrace
// whatif) of the settings of kReportSettings, started beside the analysis on the other cores (so that `report` takes
// hardly longer; on one core it runs after it), only for a trace with tensor blocks, and answering only when the trace
// has a PyTorch OOM and its self-check is exact. Anything that keeps it from answering (not replayable, no OOM, no
// setting avoids it) leaves the findings as they were.
class BestSettingSearch {
 public:
  explicit BestSettingSearch(const std::string& trace_path) : trace_path_(trace_path) {
    const unsigned cores = std::thread::hardware_concurrency();
    if (trace_path_.empty() || !has_tensor_blocks()) return;
    options_.alloc_confs = replay::kReportSettings;
    options_.settings_only_if_exact = true;
    options_.only_with_oom = true;
    options_.first_oom_only = true;
    options_.threads = cores > 1 ? cores - 1 : 1;
    if (cores > 1) result_ = std::async(std::launch::async, [this] { return search(); });
    deferred_ = cores <= 1;
  }

  void name_in(analysis::Report& report) {
    Outcome outcome;
    if (result_.valid()) {
      outcome = result_.get();
    } else if (deferred_ && has_torch_oom(report)) {
      outcome = search();
    }
    if (report.trace.salvaged) return;
    std::string line;
    std::optional<int64_t> device;
    if (outcome.whatif) {
      line = analysis::describe_best_setting(*outcome.whatif);
      if (!line.empty()) line = "replayed (gpumemtrace whatif): " + line;
      device = outcome.whatif->device;
    } else {
      line = outcome.unchecked_torch;  // every PyTorch OOM: the device was never chosen
    }
    if (line.empty()) return;
    for (analysis::AllocFailure& failure : report.failures) {
      if (failure.heap_source == kTorch && (!device || failure.device == *device)) failure.best_setting = line;
    }
  }

 private:
  static constexpr int64_t kTorch = static_cast<int64_t>(schema::Source::TorchAllocator);

  bool has_tensor_blocks() const {
    try {
      return analysis::TraceFile::open(trace_path_).meta(schema::meta::kTensorBlocks).value_or("") == "1";
    } catch (const std::exception&) {
      return false;  // the analysis says what is wrong with the file
    }
  }
  static bool has_torch_oom(const analysis::Report& report) {
    for (const analysis::AllocFailure& failure : report.failures) {
      if (failure.heap_source == kTorch) return true;
    }
    return false;
  }
  struct Outcome {
    std::optional<replay::WhatIfReport> whatif;
    std::string unchecked_torch;  // the note said instead, for a torch whose policy was not checked
  };
  Outcome search() const {
    Outcome outcome;
    try {
      outcome.whatif = replay::run_whatif(trace_path_, options_);
    } catch (const replay::NotReplayableError& e) {
      // Not replayed without --force-torch-version: said in one line, never a setting from an unchecked policy.
      if (e.why == replay::NotReplayable::UncheckedTorchVersion) {
        outcome.unchecked_torch = "not replayed: this torch's allocator policy has not been checked (checked: torch " +
                                  replay::checked_torch_releases() + "; gpumemtrace whatif --force-torch-version)";
      }
    } catch (const std::exception&) {
      // not replayable (lost events, cudaMallocAsync) or unreadable: the findings stay as they are
    }
    return outcome;
  }

  std::string trace_path_;
  replay::WhatIfOptions options_;
  std::future<Outcome> result_;
  bool deferred_ = false;
};

int run_report(ReportOptions options) {
  analysis::EventFilters filters;
  if (!resolve_snapshot_names(options) || !filters_from_options(options, filters)) return kExitBadInput;
  // Before the trace: a bad suppressions file is a bad option, whatever the trace holds.
  std::optional<analysis::SuppressionSet> suppressions = load_suppression_files(options.gates.suppression_files);
  if (!suppressions) return kExitBadInput;
  try {
    analysis::AnalyzeOptions analyze_options;
    analyze_options.filters = filters;
    if (!suppressions->rules.empty()) analyze_options.suppressions = &*suppressions;
    if (options.min_bytes > 0) analyze_options.min_bytes = options.min_bytes;
    analyze_options.top_stacks = options.top;  // call stacks kept per moment (peak, growth, failures)
    Progress progress("analyzing " + options.trace_path);
    if (progress.enabled()) {
      analyze_options.progress = [&](uint64_t read, uint64_t estimated) { progress.update(read, estimated, "events"); };
    }
    // A damaged trace is salvaged from a private copy (analysis/read/salvage.h).
    BestSettingSearch best_setting(options.whatif ? options.trace_path : std::string());
    analysis::Report report = analysis::analyze_trace_file(options.trace_path, analyze_options);
    progress.finish();
    best_setting.name_in(report);

    // On stderr as well as in the report: with --format json or -o, the report itself may not be read by a
    // person, and leaks in an unfinished trace are only "live at the end".
    if (report.trace.salvaged) {
      fmt::print(stderr, "gpumemtrace: warning: '{}': {}\n", options.trace_path, *report.trace.salvaged);
    } else if (!report.trace.complete) {
      fmt::print(stderr,
                 "gpumemtrace: warning: '{}' is incomplete ({}): memory live at the end was not necessarily "
                 "leaked\n",
                 options.trace_path, analysis::incomplete_reason(report.trace));
    }
    if (!report.filters.nothing_matched.empty()) {
      fmt::print(stderr, "gpumemtrace: {}\n", report.filters.nothing_matched);
    }

    if (int applies = check_gates_apply(report, options.gates); applies != kExitOk) return applies;

    if (report.aggregate && (options.format == "perfetto" || options.format == "memory-viz")) {
      fmt::print(stderr,
                 "gpumemtrace: --format {} draws every allocation, and '{}' is an aggregate trace (run --aggregate), "
                 "which keeps only the live set and per-window sums: use text, json, html or folded\n",
                 options.format, options.trace_path);
      return kExitBadInput;
    }
    if (report.aggregate && options.format == "html") {
      fmt::print(stderr,
                 "gpumemtrace: note: '{}' is an aggregate trace: the page's single allocations are those it kept "
                 "(live at the end, at a peak or at a failure), and its curves are per window\n",
                 options.trace_path);
    }
    analysis::RenderOptions render_options;
    render_options.top = options.top;
    render_options.full_stacks = options.full_stacks;
    render_options.full_names = options.full_names;
    render_options.max_allocations = options.max_allocations;
    // The formats that ship single allocations read the trace once more (the Report holds none).
    std::optional<analysis::TraceFile> trace;
    if (format_reads_allocations(options.format)) {
      if (report.trace.salvaged) {
        fmt::print(stderr,
                   "gpumemtrace: --format {} reads every allocation of the trace, and '{}' is damaged; the text and "
                   "json reports show what was salvaged\n",
                   options.format, options.trace_path);
        return kExitBadInput;
      }
      trace.emplace(analysis::TraceFile::open(options.trace_path));
    }
    std::string text =
        render_report(report, options.format, render_options, options.folded_of, trace ? &*trace : nullptr, filters);
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

void add_filter_options(CLI::App& command, ReportOptions& options) {
  command.add_option("--device", options.device, "Analyze only allocations on CUDA device N (-1: host memory)")
      ->check(CLI::Range(int64_t{-1}, int64_t{1'000'000}))
      ->type_name("N")
      ->group("Filters");
  command
      .add_option("--since", options.since,
                  "Analyze only allocations from SECONDS into the run (e.g. 1.5), or from the snapshot NAME "
                  "(gpumemtrace ctl PID snapshot NAME)")
      ->type_name("SECONDS|NAME")
      ->group("Filters");
  command
      .add_option("--at", options.at,
                  "Analyze what was live at the snapshot NAME (taken with gpumemtrace ctl PID snapshot NAME): "
                  "--until its time")
      ->type_name("NAME")
      ->group("Filters");
  command
      .add_option("--until", options.until,
                  "Analyze only up to SECONDS into the run: what is live then counts as live at the end")
      ->type_name("SECONDS")
      ->group("Filters");
  command.add_option("--pid", options.pid, "Analyze the trace only if it is of process PID")
      ->check(CLI::PositiveNumber)
      ->type_name("PID")
      ->group("Filters");
  command.add_option("--min-size", options.min_size, "Ignore allocations smaller than SIZE (units as for --min-bytes)")
      ->transform(CLI::AsSizeValue(true))
      ->type_name("SIZE")
      ->group("Filters");
  command
      .add_option("--range", options.range,
                  "Analyze only allocations made inside an NVTX range named NAME (any domain, any depth)")
      ->type_name("NAME")
      ->group("Filters");
}

}  // namespace

CommandAction add_report_command(CLI::App& app) {
  auto options = std::make_shared<ReportOptions>();
  CLI::App* command = app.add_subcommand(
      "report", "Analyze a trace: memory still allocated at exit grouped by the call stack that allocated it "
                "(largest first), the peak of live GPU memory and what was live then, live memory over time, steady "
                "growth, fragmentation, failed allocations labelled out-of-memory or fragmentation, totals "
                "(docs/analysis.md defines each).");
  command
      ->add_option("trace", options->inputs,
                   "Trace file written by `gpumemtrace run`; several traces, or a directory of them, give one "
                   "merged report over the processes (ranks) of a job")
      ->required()
      ->type_name("TRACE");
  command
      ->add_option("--format", options->format,
                   "Output format: text for people, json for scripts, html (one self-contained page with plots), "
                   "perfetto (Chrome trace-event JSON for ui.perfetto.dev), folded (stacks for flamegraph.pl), "
                   "memory-viz (PyTorch's memory snapshot pickle for pytorch.org/memory_viz; binary, use -o)")
      ->check(CLI::IsMember(report_formats()))
      ->capture_default_str();
  command
      ->add_option("--folded-of", options->folded_of,
                   "With --format folded: weigh stacks by leaked bytes, or by bytes live at each device's peak")
      ->check(CLI::IsMember(folded_weights()))
      ->capture_default_str();
  command
      ->add_option("--top", options->top,
                   "Show the N largest leak groups (and failed allocations); keep N call stacks per moment "
                   "(peak, growth, failure) in the JSON report")
      ->check(CLI::Range(size_t{1}, size_t{1'000'000}))
      ->type_name("N")
      ->capture_default_str();
  command
      ->add_option("--max-allocations", options->max_allocations,
                   "With --format perfetto or html: show at most N single allocations, the largest of each stretch "
                   "of the run; the rest are counted and summed (the output says how many)")
      ->check(CLI::Range(size_t{1}, size_t{10'000'000}))
      ->type_name("N")
      ->capture_default_str();
  command->add_flag("!--no-whatif", options->whatif,
                    "Do not replay a PyTorch OOM under other allocator settings (by default its finding names the "
                    "setting that would have avoided it: gpumemtrace whatif)");
  command->add_flag("--full-stacks", options->full_stacks,
                    "Show every frame of a stack: by default runs of frames outside your code (PyTorch, CUDA, the "
                    "C/C++ runtime, Python) are folded into one '... N frames in <modules>' line (JSON keeps all)");
  command->add_flag("--full-names", options->full_names,
                    "Show C++ names as recorded: by default long names have their template arguments and "
                    "parameter lists elided");
  command->add_option("-o,--output", options->output_path, "Write the report to FILE instead of stdout")
      ->type_name("FILE");
  command
      ->add_option("--min-bytes", options->min_bytes,
                   "Hide leak groups smaller than SIZE in total (totals still count them); "
                   "units: 4096, 64KiB, 1MiB, 1MB=1000000")
      ->transform(CLI::AsSizeValue(true))
      ->type_name("SIZE");
  add_filter_options(*command, *options);
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
      "  gpumemtrace report trace.db --format memory-viz -o snap.pickle   open in pytorch.org/memory_viz\n"
      "  gpumemtrace report trace.db --format folded | flamegraph.pl > leaks.svg\n"
      "  gpumemtrace report trace.db --format folded --folded-of peak   stacks live at the peak\n"
      "  gpumemtrace report trace.db --device 1 --since 60   device 1, from 60 s into the run\n"
      "  gpumemtrace report trace.db --at before-load       what was live at a snapshot taken with\n"
      "                                                     gpumemtrace ctl PID snapshot before-load\n"
      "  gpumemtrace report trace.db --range train_step      only what was allocated inside NVTX ranges\n"
      "                                                     named train_step (memory per range and growth\n"
      "                                                     per repetition are in every report)\n"
      "\n" +
      std::string(kGateHelp) +
      "\n"
      "Exit status: 0 when the report was written (leaks or not, and when filters match nothing: the\n"
      "report says so), 1 when a --fail-on-leak or --fail-on-growth gate failed, 2 when the trace or a\n"
      "suppressions file cannot be read or an option value is malformed, 3 on an internal error, 4 when a\n"
      "gate was given a trace that is incomplete, lost events or had frees after it was closed (no verdict;\n"
      "see --allow-incomplete).\n"
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
        fmt::print(stderr,
                   "gpumemtrace: --format {} applies to the report of one trace; a merged report is text or json\n",
                   options->format);
        return kExitBadInput;
      }
      if (const char* gate = gate_option_given(options->gates)) {
        fmt::print(stderr, "gpumemtrace: {} applies to the report of one trace, not to a merged report\n", gate);
        return kExitBadInput;
      }
      if (has_filters(*options)) {
        fmt::print(
            stderr,
            "gpumemtrace: --device, --since, --until, --at, --pid, --min-size and --range apply to the report of "
            "one trace, not to a merged report\n");
        return kExitBadInput;
      }
      return run_merged_report({options->inputs, options->format, options->top, options->output_path});
    }
    options->trace_path = options->inputs.front();
    return run_report(*options);
  };
}

}  // namespace gmt::cli
