// gpumemtrace: the command-line front end. It only parses options and dispatches; the work lives in the
// command files and in analysis/.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "cli/exit_codes.h"

int main(int argc, char** argv) {
  CLI::App app{
      "gpumemtrace: find GPU memory leaks, watermark growth and fragmentation in CUDA programs.\n\n"
      "  gpumemtrace run -o trace.db -- ./app args     profile an app (exit code passed through)\n"
      "  gpumemtrace report trace.db                   leaks by call stack, peak, totals\n"
      "  gpumemtrace diff base.db new.db               what regressed between two runs (for CI)\n"
      "  gpumemtrace whatif trace.db                   another PyTorch allocator setting, replayed\n"
      "  gpumemtrace ctl PID snapshot NAME             mark a moment of a running process (also pause, resume)\n"
      "  gpumemtrace top PID                           watch a running process: live bytes, top and growing lines\n",
      "gpumemtrace"};
  app.set_version_flag("--version", "gpumemtrace " GMT_VERSION);
  app.require_subcommand(1);

  gmt::cli::CommandAction actions[] = {
      gmt::cli::add_run_command(app),        // cli/run_command.cpp
      gmt::cli::add_report_command(app),     // cli/report_command.cpp
      gmt::cli::add_symbolize_command(app),  // cli/symbolize_command.cpp
      gmt::cli::add_diff_command(app),       // cli/diff_command.cpp
      gmt::cli::add_whatif_command(app),     // cli/whatif_command.cpp
      gmt::cli::add_ctl_command(app),        // cli/ctl_command.cpp
      gmt::cli::add_top_command(app),        // cli/top_command.cpp
  };

  int cli_argc = argc;
  if (argc > 1 && std::string_view(argv[1]) == "run") {
    // Only a "--" among our own options counts; once the app's name is reached, every "--" is the app's.
    const CLI::App* run = app.get_subcommand("run");
    for (int i = 2; i < argc; ++i) {
      std::string_view arg = argv[i];
      if (arg == "--") {
        gmt::cli::set_run_app_argv(std::vector<std::string>(argv + i + 1, argv + argc));
        cli_argc = i;
        break;
      }
      if (arg.empty() || arg[0] != '-') break;  // the app's name: CLI11's prefix_command takes it from here
      // An option of `run` that takes a value (`-o trace.db`): the next argument is its value, not the app.
      const CLI::Option* option = run->get_option_no_throw(std::string(arg));
      if (option && option->get_items_expected_min() > 0) ++i;
    }
  }

  try {
    app.parse(cli_argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    // `run` keeps 1-124 for the app's own codes (cli/exit_codes.h): its bad options are its own failure.
    bool run_command = argc > 1 && std::string_view(argv[1]) == "run";
    return run_command ? gmt::cli::kExitRunFailed : gmt::cli::kExitBadInput;
  }

  // Exactly one subcommand was parsed; the registration order above matches the subcommand order.
  auto subcommands = app.get_subcommands({});
  for (size_t i = 0; i < subcommands.size(); ++i) {
    if (subcommands[i]->parsed()) return actions[i]();
  }
  fmt::print(stderr, "gpumemtrace: no command given; see gpumemtrace --help\n");
  return gmt::cli::kExitBadInput;
}
