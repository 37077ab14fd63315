// CI gates of `report` (--fail-on-leak, --fail-on-growth) and the options they share with `diff`
// (--suppressions). Kept apart from report_command.cpp so that each command only wires them in.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/model/report.h"
#include "analysis/model/suppressions.h"

namespace CLI {
class App;
}

namespace gmt::cli {

struct ReportGates {
  std::optional<uint64_t> fail_on_leak;  // fail when leaked bytes (after suppressions) exceed this
  bool fail_on_growth = false;
  bool fail_on_disagreement = false;  // run --verify traces: fail when the backends disagree or did not compare
  bool allow_incomplete = false;      // judge an incomplete trace (or one with lost events) by what it holds
  std::vector<std::string> suppression_files;
};

// Registers --fail-on-leak[=SIZE], --fail-on-growth, --fail-on-disagreement, --allow-incomplete and --suppressions
// FILE on `report`.
void add_gate_options(CLI::App& command, ReportGates& gates);
// Registers --suppressions FILE (repeatable) alone (for `diff`).
void add_suppression_option(CLI::App& command, std::vector<std::string>& files);

// Loads the suppressions files; on a bad file prints one line to stderr and returns nullopt.
std::optional<analysis::SuppressionSet> load_suppression_files(const std::vector<std::string>& files);

// The first gate or suppressions option given, for a message; nullptr when none was.
const char* gate_option_given(const ReportGates& gates);

// Before the report is written: kExitBadInput, with a message, when a gate cannot apply to this trace
// (--fail-on-disagreement on a trace not recorded with run --verify); else kExitOk.
int check_gates_apply(const analysis::Report& report, const ReportGates& gates);
// After the report was written: kExitIncompleteTrace when a gate was asked for a verdict the trace cannot support
// (analysis::supports_verdict) without --allow-incomplete; else kExitFindings with one stderr line per failed
// gate, else kExitOk.
int check_gates(const analysis::Report& report, const ReportGates& gates);

// Footer lines documenting the gates' exit codes.
extern const char* const kGateHelp;

}  // namespace gmt::cli
