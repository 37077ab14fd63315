// `gpumemtrace symbolize`: fill in function names and source lines of traces recorded with --no-symbolize,
// or recorded where the binaries were not at hand.
#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/post_run.h"

namespace gmt::cli {

CommandAction add_symbolize_command(CLI::App& app) {
  auto traces = std::make_shared<std::vector<std::string>>();
  auto quiet = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("symbolize", "Resolve the call stacks of traces to functions and source lines");
  cmd->footer("Run on the machine that recorded the trace, or where the same binaries (same build-ids) are.\n"
              "Example:\n  gpumemtrace symbolize train.db");
  cmd->add_option("traces", *traces, "Trace files")->required();
  cmd->add_flag("-q,--quiet", *quiet, "No progress line");
  return [traces, quiet] {
    int exit_code = kExitOk;
    for (const auto& trace : *traces) {
      if (!symbolize_trace_file(trace, *quiet)) exit_code = kExitBadInput;
    }
    return exit_code;
  };
}

}  // namespace gmt::cli
