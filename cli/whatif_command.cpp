// `gpumemtrace whatif trace.db`: would another setting of PyTorch's caching allocator have avoided this OOM? A replay
// of the recorded allocator actions under other settings (analysis/replay/whatif.h).
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "analysis/read/trace_file.h"
#include "analysis/render/render_whatif.h"
#include "analysis/replay/whatif.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"

namespace gmt::cli {
namespace {

struct WhatIfCommandOptions {
  std::string trace_path;
  std::string format = "text";
  replay::WhatIfOptions whatif;
  int64_t device = -1;
  uint64_t capacity = 0;
};

int exit_code(replay::NotReplayable why) {
  switch (why) {
    case replay::NotReplayable::NoTensorBlocks: return kExitNoTensorBlocks;
    case replay::NotReplayable::LostBlockEvents: return kExitLostBlockEvents;
    case replay::NotReplayable::CudaMallocAsync: return kExitCudaMallocAsync;
    case replay::NotReplayable::UncheckedTorchVersion: return kExitUncheckedTorchVersion;
    case replay::NotReplayable::UnknownDevice:
    default: return kExitBadInput;
  }
}

int run_whatif(WhatIfCommandOptions options) {
  if (options.device >= 0) options.whatif.device = options.device;
  if (options.capacity > 0) options.whatif.capacity = options.capacity;
  if (options.whatif.alloc_confs.empty() && !options.whatif.sweep) options.whatif.sweep = true;
  try {
    replay::WhatIfReport report = replay::run_whatif(options.trace_path, options.whatif);
    std::string text =
        options.format == "json" ? analysis::render_whatif_json(report) : analysis::render_whatif_text(report);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return kExitOk;
  } catch (const replay::NotReplayableError& e) {
    fmt::print(stderr, "gpumemtrace: {}\n", e.what());
    return exit_code(e.why);
  } catch (const analysis::TraceError& e) {
    fmt::print(stderr, "gpumemtrace: {}\n", e.what());
    return kExitBadInput;
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpumemtrace: internal error while replaying '{}': {}\n", options.trace_path, e.what());
    return kExitInternal;
  }
}

}  // namespace

CommandAction add_whatif_command(CLI::App& app) {
  auto options = std::make_shared<WhatIfCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "whatif", "Replay PyTorch's caching allocator from a trace under other settings (PYTORCH_ALLOC_CONF): peak "
                "reserved memory, fragmentation and whether the recorded OOM would have happened.");
  command->add_option("trace", options->trace_path, "A trace recorded with PyTorch's tensor blocks")
      ->required()
      ->type_name("TRACE");
  command
      ->add_option("--alloc-conf", options->whatif.alloc_confs,
                   "A setting to replay, as PYTORCH_ALLOC_CONF would hold it (repeatable); \"\" is the default")
      ->type_name("CONF")
      ->allow_extra_args(false);
  command->add_flag("--sweep", options->whatif.sweep,
                    "Replay the standard grid as well, one setting per core (the default without --alloc-conf)");
  command->add_option("--device", options->device, "The device to replay (default: the first with tensor blocks)")
      ->type_name("N");
  CLI::AsSizeValue as_size(true);
  command
      ->add_option("--capacity", options->capacity,
                   "The bytes PyTorch may reserve, instead of the figure taken from the trace")
      ->transform(as_size)
      ->type_name("SIZE");
  command->add_flag("--force-torch-version", options->whatif.force_torch_version,
                    "Replay a trace of a torch release the policy was not checked for (or that the trace does not "
                    "name): its self-check then says whether that torch follows the same rules; no best setting is "
                    "named");
  command->add_option("--format", options->format, "Output format: text for people, json for scripts")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  command->footer("Examples:\n"
                  "  gpumemtrace whatif trace.db                                   the standard grid\n"
                  "  gpumemtrace whatif trace.db --alloc-conf expandable_segments:True --format json\n"
                  "\n"
                  "The recorded run comes first, then the replay under the recorded settings (the self-check: it\n"
                  "must reproduce every segment the recording made, to the byte), then each setting. A replay stops\n"
                  "predicting at the first event where its outcome differs from the recording, and names it.\n"
                  "\n"
                  "Exit status: 0 when the table was written, 2 when the trace cannot be read (or an option is\n"
                  "wrong), 3 on an internal error, 5 when the trace has no tensor blocks, 6 when allocator events\n"
                  "were lost while recording, 7 when it was recorded under the cudaMallocAsync backend, 10 when\n"
                  "its torch is not a release the policy was checked for (see --force-torch-version).\n");
  return [options] { return run_whatif(*options); };
}

}  // namespace gmt::cli
