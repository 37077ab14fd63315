// The CLI's subcommands. Each one registers its options on the parent CLI::App and returns the action to run
// once parsing succeeded. Actions return the process exit code (see cli/exit_codes.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace gmt::cli {

using CommandAction = std::function<int()>;

CommandAction add_run_command(CLI::App& app);  // cli/run_command.cpp
// `run [options] -- app args`: main() splits argv at the first "--" and hands the app's part over here, so
// that CLI11 never parses the app's own options.
void set_run_app_argv(std::vector<std::string> app_argv);
CommandAction add_report_command(CLI::App& app);     // cli/report_command.cpp
CommandAction add_symbolize_command(CLI::App& app);  // cli/symbolize_command.cpp
CommandAction add_diff_command(CLI::App& app);       // cli/diff_command.cpp
CommandAction add_ctl_command(CLI::App& app);        // cli/ctl_command.cpp
CommandAction add_whatif_command(CLI::App& app);     // cli/whatif_command.cpp
CommandAction add_top_command(CLI::App& app);        // cli/top_command.cpp

}  // namespace gmt::cli
