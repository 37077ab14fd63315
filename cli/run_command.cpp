// `gpumemtrace run`: start an app with the preload library, pass its exit code through, then symbolize and
// summarize the traces it produced.
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/app_exit.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/install_layout.h"
#include "cli/launcher.h"
#include "cli/post_run.h"
#include "cli/run_files.h"
#include "cli/sanitizer_runtime.h"
#include "schema/environment.h"
#include "schema/trace_naming.h"
#include "schema/trace_schema.h"

namespace gmt::cli {
namespace {

namespace env = schema::env;

struct RunOptions {
  std::vector<std::string> command;
  std::string output;  // pattern; empty: gpumemtrace.<app>.%p.db
  bool force = false;
  bool simulate = false;
  std::string backend = "auto";
  bool verify = false;
  bool aggregate = false;
  bool paused = false;
  bool no_stacks = false;
  bool free_stacks = false;
  uint64_t sample_block_stacks = 0;  // bytes; 0: every block takes its stack
  std::string unwind;                // empty: the library's default (fast)
  bool python_hooks = true;
  bool torch_blocks = true;
  bool no_symbolize = false;
  bool quiet = false;
  bool no_nvtx_capture = false;
  bool nvtx_emit = false;
  uint64_t nvtx_peak_step = uint64_t{1} << 30;
};

std::string default_output_pattern(const std::string& app) {
  std::string name = app.substr(app.rfind('/') + 1);
  return "gpumemtrace." + name + ".%p.db";
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : " ") + p;
  return out;
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// NVTX: NVTX loads NVTX_INJECTION64_PATH in the app on its first NVTX call; pointing it at the preload
// library captures the app's ranges. A tool that set it before us (Nsight Systems runs us under it) is passed
// on in GMT_NVTX_CHAIN: the library loads it and hands it every NVTX call, so both see the ranges.
// Python processes of the run import python/sitecustomize.py (first on PYTHONPATH), which chains to their own
// sitecustomize and starts the framework hooks (python/gpumemtrace_inprocess). Other processes ignore both.
void add_python_environment(const RunOptions& options, const InstallLayout& layout, LaunchSpec& spec) {
  spec.environment.emplace_back(env::kLibrary, layout.preload_library);
  spec.environment.emplace_back(env::kPythonHooks, options.python_hooks ? "1" : "0");
  spec.environment.emplace_back(env::kTorchBlocks, options.torch_blocks ? "1" : "0");
  if (!options.python_hooks || !file_exists(layout.python_dir + "/sitecustomize.py")) return;
  const char* old_path = getenv("PYTHONPATH");
  std::string python_path = layout.python_dir;
  if (old_path && *old_path) python_path += std::string(":") + old_path;
  spec.environment.emplace_back("PYTHONPATH", python_path);
}

void add_nvtx_environment(const RunOptions& options, const std::string& preload_library, LaunchSpec& spec) {
  const char* previous = getenv("NVTX_INJECTION64_PATH");
  bool other_tool = previous && *previous && !same_file(previous, preload_library);
  if (!options.no_nvtx_capture) {
    if (other_tool) spec.environment.emplace_back(env::kNvtxChain, previous);
    spec.environment.emplace_back("NVTX_INJECTION64_PATH", preload_library);
  }
  spec.environment.emplace_back(env::kNvtxEmit, options.nvtx_emit ? "1" : "0");
  spec.environment.emplace_back(env::kNvtxPeakStep, std::to_string(options.nvtx_peak_step));
  if (options.nvtx_emit && !other_tool && !options.quiet) {
    fmt::print(stderr, "gpumemtrace: --nvtx-emit: no NVTX tool was set before us (NVTX_INJECTION64_PATH, e.g. by "
                       "Nsight Systems) to receive gpumemtrace's markers and ranges\n");
  }
}

// A file the traced processes append their trace paths to (one line each), so that after the run we know
// every trace it produced, forked and exec'ed children included.
std::string make_registry_file() {
  remove_files_of_ended_runs(temporary_folder(), "run");
  return make_run_file(temporary_folder(), "run");
}

std::vector<std::string> read_registry(const std::string& path) {
  std::vector<std::string> traces;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) traces.push_back(line);
  }
  return traces;
}

// libcupti of the CUDA toolkit in use: GMT_CUPTI_LIBRARY if set, else next to the nvcc on PATH, CUDA_HOME,
// /usr/local/cuda; CUPTI 13, else 12. Empty when none is found: the library then asks the loader for
// libcupti.so.13, then libcupti.so.12 (cupti/cupti_loader.h).
std::string find_cupti_library() {
  if (const char* set = getenv(env::kCuptiLibrary); set && *set) return set;
  std::vector<std::string> roots;
  if (const char* path = getenv("PATH")) {
    std::string dirs = path;
    for (size_t start = 0; start <= dirs.size();) {
      size_t end = dirs.find(':', start);
      if (end == std::string::npos) end = dirs.size();
      std::string dir = dirs.substr(start, end - start);
      if (!dir.empty() && file_exists(dir + "/nvcc")) roots.push_back(dir + "/..");
      start = end + 1;
    }
  }
  if (const char* home = getenv("CUDA_HOME"); home && *home) roots.push_back(home);
  roots.push_back("/usr/local/cuda");
  for (const auto& root : roots) {
    for (const char* soname : {"libcupti.so.13", "libcupti.so.12"}) {
      for (const char* dir : {"/lib64/", "/extras/CUPTI/lib64/", "/lib/"}) {
        if (file_exists(root + dir + soname)) return root + dir + soname;
      }
    }
  }
  return {};
}

// The started process's trace when it left none (it never touched CUDA, or died before its trace existed) or
// only a stump (it ended while its writer was creating the trace: GPU suite, an app calling _exit at once):
// a stand-in, so that `report` always has a file, complete only when the app exited without a trace.
void ensure_root_trace(const RunOptions& options, const std::string& backend, const LaunchResult& result,
                       std::vector<std::string>& traces) {
  const std::string& path = result.root_trace_path;
  for (const auto& t : traces) {
    if (t == path) return;  // registered: the library created it, schema and all
  }
  // The library builds the trace as "<path>.init-<pid>" and renames it once its schema is in: a process that
  // ended in between leaves that file (recorder/trace_writer.cpp). A stump under the final name comes from
  // an older library.
  std::string unfinished = path + ".init-" + std::to_string(result.pid);
  bool stump = file_exists(unfinished) || is_trace_stump(path);
  if (file_exists(path) && !is_trace_stump(path)) return;
  for (const std::string& file : {path, unfinished}) {
    for (const char* suffix : {"", "-wal", "-shm"}) unlink((file + suffix).c_str());
  }
  EmptyTrace empty;
  empty.path = path;
  empty.pid = result.pid;
  empty.command_line = join(options.command);
  empty.simulated = options.simulate;
  if (backend != "auto") empty.backend = backend;  // --backend takes the schema's names
  // Nothing was recorded, so nothing was compared: never a clean cross-check.
  if (options.verify) empty.verify_unavailable = "the process recorded nothing (no CUDA allocation call)";
  std::string how = result.signal != 0
                        ? fmt::format("killed by signal {} ({})", result.signal, strsignal(result.signal))
                        : fmt::format("ended with exit code {}", result.exit_code);
  // Killed, it may have recorded events its writer had not written yet: "before its trace was written" says
  // only what is known (a process that records anything and exits normally has its trace by then).
  if (result.signal != 0 || stump) empty.stop_reason = how + " before its trace was written";
  std::string error;
  if (!write_empty_trace(empty, error)) {
    fmt::print(stderr, "gpumemtrace: {}\n", error);
    return;
  }
  traces.insert(traces.begin(), path);
  if (options.quiet) return;
  if (empty.stop_reason.empty()) {
    fmt::print(stderr, "gpumemtrace: the app made no CUDA allocation calls\n");
  } else {
    fmt::print(stderr,
               "gpumemtrace: the app {} before its trace was written: the trace {} is empty and marked "
               "incomplete\n",
               result.signal != 0 ? fmt::format("died by signal {} ({})", result.signal, strsignal(result.signal))
                                  : fmt::format("ended (exit code {})", result.exit_code),
               path);
  }
}

int run(const RunOptions& options) {
  if (std::string unknown = schema::unknown_pattern_sequence(options.output); !unknown.empty()) {
    fmt::print(stderr, "gpumemtrace: -o '{}': unknown sequence '{}'; a trace name may hold {}\n", options.output,
               unknown, schema::kPatternSequences);
    return kExitRunFailed;
  }
  if (options.simulate && options.backend != "auto" && options.backend != schema::backend_names::kRuntime) {
    fmt::print(stderr,
               "gpumemtrace: --simulate has no driver below it and counts at the runtime level; "
               "--backend {} does not apply\n",
               options.backend);
    return kExitRunFailed;
  }
  if (options.verify && (options.simulate || options.backend == schema::backend_names::kRuntime)) {
    fmt::print(stderr,
               "gpumemtrace: --verify compares the two driver-level backends (hooks and cupti); {} counts "
               "at the runtime level, where there is no second backend\n",
               options.simulate ? "--simulate" : "--backend runtime");
    return kExitRunFailed;
  }
  if (options.verify && options.aggregate) {
    fmt::print(stderr, "gpumemtrace: --verify matches every event of the two backends one to one, and --aggregate "
                       "keeps only a summary of them: use one or the other\n");
    return kExitRunFailed;
  }
  InstallLayout layout = find_install_layout();
  if (!file_exists(layout.preload_library)) {
    fmt::print(stderr, "gpumemtrace: the preload library is missing at '{}'; reinstall gpumemtrace\n",
               layout.preload_library);
    return kExitRunFailed;
  }
  std::string sim_runtime = layout.simulated_runtime_dir + "/libcudart.so.13";
  if (options.simulate && !file_exists(sim_runtime)) {
    fmt::print(stderr, "gpumemtrace: --simulate needs the simulated CUDA runtime at '{}', which is missing\n",
               sim_runtime);
    return kExitRunFailed;
  }

  LaunchSpec spec;
  spec.command = options.command;
  spec.output_pattern = options.output.empty() ? default_output_pattern(options.command[0]) : options.output;
  spec.overwrite = options.force;
  std::string registry = make_registry_file();
  std::string counters = make_event_counters_file();

  const char* old_preload = getenv("LD_PRELOAD");
  std::string preload = layout.preload_library;
  if (old_preload && *old_preload) preload += std::string(":") + old_preload;
  // An app built with -fsanitize=address|thread: its runtime must come first (ASan checks), before us.
  if (std::string runtime = sanitizer_runtime_of(options.command[0]); !runtime.empty()) {
    preload = runtime + ":" + preload;
  }
  // The simulated runtime has no driver below it: only the runtime hooks can see its allocations.
  std::string backend = options.simulate ? schema::backend_names::kRuntime : options.backend;
  spec.environment = {{"LD_PRELOAD", preload},
                      {env::kBackend, backend},
                      {env::kOutput, spec.output_pattern},
                      {env::kRegistry, registry},
                      {env::kEventCounters, counters},
                      {env::kNoStacks, options.no_stacks ? "1" : "0"},
                      {env::kFreeStacks, options.free_stacks ? "1" : "0"},
                      {env::kBlockStackSample, std::to_string(options.sample_block_stacks)},
                      {env::kSimulated, options.simulate ? "1" : "0"},
                      {env::kVerify, options.verify ? "1" : "0"},
                      {env::kAggregate, options.aggregate ? "1" : "0"},
                      {env::kStartPaused, options.paused ? "1" : "0"}};
  if (!options.unwind.empty()) spec.environment.emplace_back(env::kUnwind, options.unwind);
  if (backend != schema::backend_names::kRuntime) {
    // The driver loads this at cuInit and calls its InitializeInjection: the earliest moment for CUPTI.
    // Another tool's injection (Nsight, compute-sanitizer) is left in place; the hooks start CUPTI then.
    const char* injection = getenv("CUDA_INJECTION64_PATH");
    if (!injection || !*injection) spec.environment.emplace_back("CUDA_INJECTION64_PATH", layout.preload_library);
    std::string cupti = find_cupti_library();
    if (!cupti.empty()) spec.environment.emplace_back(env::kCuptiLibrary, cupti);
  }
  add_nvtx_environment(options, layout.preload_library, spec);
  add_python_environment(options, layout, spec);
  if (options.simulate) {
    const char* old_path = getenv("LD_LIBRARY_PATH");
    std::string library_path = layout.simulated_runtime_dir;
    if (old_path && *old_path) library_path += std::string(":") + old_path;
    spec.environment.emplace_back("LD_LIBRARY_PATH", library_path);
    spec.environment.emplace_back(env::kSimQuiet, "1");  // we say it ourselves, once
    if (!options.quiet) {
      fmt::print(stderr,
                 "gpumemtrace: using the SIMULATED CUDA runtime (no GPU): allocations are simulated, kernels are "
                 "not run\n");
    }
  }

  LaunchResult result = launch_and_wait(spec);
  std::vector<std::string> traces = registry.empty() ? std::vector<std::string>{} : read_registry(registry);
  if (!registry.empty()) unlink(registry.c_str());
  const std::optional<EventsAtExit> events_at_exit = take_events_at_exit(counters);
  if (!result.started) {
    fmt::print(stderr, "gpumemtrace: {}\n", result.error);
    return result.error_exit_code;
  }

  ensure_root_trace(options, backend, result, traces);
  if (file_exists(result.root_trace_path)) record_app_exit(result.root_trace_path, result, events_at_exit);

  if (!options.quiet) {
    if (result.signal != 0) {
      fmt::print(stderr, "gpumemtrace: the app was killed by signal {} ({})\n", result.signal,
                 strsignal(result.signal));
    } else {
      fmt::print(stderr, "gpumemtrace: the app exited with code {}\n", result.exit_code);
    }
  }
  for (const auto& trace : traces) {
    if (!options.no_symbolize) symbolize_trace_file(trace, options.quiet);
    if (!options.quiet) print_run_summary(trace);
  }
  return result.exit_code;
}

std::optional<std::vector<std::string>> g_app_argv_after_separator;

}  // namespace

void set_run_app_argv(std::vector<std::string> app_argv) { g_app_argv_after_separator = std::move(app_argv); }

CommandAction add_run_command(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* run = app.add_subcommand("run", "Run an application under the profiler and write a trace");
  run->footer(
      "The app runs unchanged; its exit status is passed through (128+N when signal N killed it) and stored in\n"
      "its trace (`report` shows it). Before the app starts, `run` exits as env(1) does: 125 when gpumemtrace\n"
      "itself fails (a bad option, an existing or unwritable trace path), 126 when the app cannot be executed,\n"
      "127 when it is not found.\n"
      "Every process of the run gets its own trace: the one started gets the -o name, children that fork or\n"
      "exec get their pid inserted (trace.db -> trace.<pid>.db) unless the name already holds %p.\n"
      "Inside a launcher, %r is the rank (RANK, else OMPI_COMM_WORLD_RANK, SLURM_PROCID, PMI_RANK) and %d the\n"
      "local GPU (LOCAL_RANK, else OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, MPI_LOCALRANKID, else the first\n"
      "CUDA_VISIBLE_DEVICES entry); without one they read \"norank\" and \"nodev\". Rank, local rank, world\n"
      "size and the devices used are recorded in the trace; `gpumemtrace report DIR` merges the ranks' traces.\n\n"
      "Examples:\n"
      "  gpumemtrace run -o train.db -- python train.py --epochs 1\n"
      "  gpumemtrace run -o train.db -- python train.py   # PyTorch: leaks named by the tensor's Python line\n"
      "  gpumemtrace run --simulate -o demo.db ./leaky     # no GPU needed: simulated CUDA runtime\n"
      "  gpumemtrace run --aggregate -o svc.db -- python serve.py   # a service for days: a bounded trace\n"
      "  gpumemtrace run --paused -o svc.db -- ./server &   # then, for the hour that matters:\n"
      "  gpumemtrace ctl svc.db resume; gpumemtrace top svc.db   # see `ctl --help`, `top --help`\n"
      "  gpumemtrace run --verify -o t.db -- ./app        # hooks and CUPTI both record; then:\n"
      "  gpumemtrace report --fail-on-disagreement t.db   # exit 1 if one saw an allocation the other did not\n"
      "  nsys profile --trace=cuda,nvtx gpumemtrace run --nvtx-emit -- ./app   # our markers in Nsight's timeline\n"
      "  torchrun --nproc_per_node=2 --no-python gpumemtrace run -o 'trace.%r.db' -- python train.py\n"
      "  srun -n 8 gpumemtrace run -o 'traces/%h.%r.db' -- ./app   # then: gpumemtrace report traces/\n"
      "  gpumemtrace report train.db\n\n"
      "Backends: auto counts with the driver hooks wherever they bind (the library preloaded and its dlsym the\n"
      "process's: cudart and frameworks then reach the driver through them) and with CUPTI where they cannot see\n"
      "the allocations (the library not preloaded, another dlsym interposed first), saying why once on stderr;\n"
      "each trace records which backend counted and why (meta backend, backend_reason, backend_note).\n"
      "--verify runs both and `report` shows the cross-check first when they disagree (docs/design.md).\n\n"
      "NVTX: the app's NVTX ranges and markers (push/pop, start/end, any domain) are recorded into the trace's\n"
      "ranges and marks tables; NVTX_INJECTION64_PATH is pointed at gpumemtrace, and a tool that had set it before\n"
      "(Nsight Systems) is chained: it still receives every NVTX call.\n");
  run->prefix_command();  // everything from the app's name on belongs to the app, options included
  run->add_option("-o,--output", options->output,
                  "Trace file name; %p = pid, %r = rank, %d = local GPU, %h = host name, %% = % "
                  "(default: gpumemtrace.<app>.%p.db)");
  run->add_flag("-f,--force", options->force, "Overwrite an existing trace file");
  run->add_flag("--simulate", options->simulate,
                "Use the simulated CUDA runtime (no GPU needed; memory is simulated, kernels are not run)");
  run->add_option("--backend", options->backend,
                  "How allocations are seen: auto (the driver hooks where they bind, else CUPTI, saying why once), "
                  "hooks (the driver entry points handed out through dlsym and cuGetProcAddress: ~1.04x of a raw "
                  "cudaMallocAsync+cudaFreeAsync pair), cupti (CUPTI's driver callbacks: the same events at ~1.8x; "
                  "falls back to hooks when another tool holds CUPTI), runtime (CUDA runtime symbols only)")
      ->check(CLI::IsMember(
          {"auto", schema::backend_names::kCupti, schema::backend_names::kHooks, schema::backend_names::kRuntime}))
      ->capture_default_str();
  run->add_flag("--verify", options->verify,
                "Cross-check the backends: the one --backend chooses counts, the other driver-level one records "
                "every event too, and each event is matched one to one; `report` lists what one saw and the other "
                "did not (--fail-on-disagreement exits 1 on any). A check mode: costs both backends' time");
  run->add_flag("--aggregate", options->aggregate,
                "A bounded trace for long runs (services): every allocation still live, those live at each new peak "
                "and at failures, and per call stack and time window the allocations and frees; the file grows "
                "with the live set and the number of call stacks, not with the run's length. Leaks, peaks, "
                "failures and fragmentation stay exact; growth over time is per window (docs/trace-format.md)");
  run->add_flag("--paused", options->paused,
                "Start with recording paused: the app runs, nothing is recorded until `gpumemtrace ctl PID resume` "
                "(PID: the app's, or this run's). The trace and its control channel exist from the app's first CUDA "
                "call. Memory allocated while paused and freed later counts as unmatched frees, never as a leak; "
                "the report says how long recording was paused");
  auto* no_stacks = run->add_flag("--no-stacks", options->no_stacks, "Record events without call stacks (cheaper)");
  run->add_option("--sample-block-stacks", options->sample_block_stacks,
                  "Take the call stacks of PyTorch's tensors (and CuPy's arrays) by sample, for a long run of a "
                  "host-bound service: every tensor of at least SIZE bytes still takes its stack, smaller ones one "
                  "per SIZE bytes allocated on average (e.g. 1MiB). Every tensor is still recorded, so leaks, peaks "
                  "and totals stay exact; the report counts the bytes of unsampled tensors apart, as \"stack not "
                  "sampled\". The CUDA level keeps every stack. Units: 4096, 64KiB, 1MiB")
      ->transform(CLI::AsSizeValue(true))
      ->type_name("SIZE")
      ->excludes(no_stacks);
  run->add_flag("--free-stacks", options->free_stacks,
                "Take call stacks for frees too (for your own SQL: the report attributes memory to the allocating "
                "stack, so by default frees take none, which halves the cost of stacks)");
  run->add_option("--unwind", options->unwind,
                  "How call stacks are walked: fast (the default: each return address's unwind rule, read once from "
                  ".eh_frame; libunwind where it cannot), libunwind (libunwind only: slower; if a stack ever looks "
                  "wrong, compare), check (both on every stack, disagreements counted in the trace's meta "
                  "stack_walk_mismatches and the first one printed; slow, for verification)")
      ->check(CLI::IsMember({"fast", "libunwind", "check"}))
      ->option_text("MODE");
  run->add_flag("!--no-python-hooks", options->python_hooks,
                std::string("Do not start the in-process Python hooks (PyTorch/CuPy/JAX allocator statistics); "
                            "PYTHONPATH is then left as it is. Python frames in stacks are separate: ") +
                    env::kNoPythonFrames + "=1");
  run->add_flag("!--no-torch-blocks", options->torch_blocks,
                "Do not record PyTorch's tensors. By default every block PyTorch's caching allocator hands to a "
                "tensor is recorded with its stack (Python frames included), through a trace tracker that a small "
                "bridge, built once per torch version against its headers, attaches to the allocator: a leak inside "
                "the cache is then named by the Python line that keeps the tensors, and memory the cache merely "
                "holds is not called leaked. Without it, PyTorch's memory is seen at the CUDA level only (its "
                "segments). It also leaves out autograd's backward() calls (which link the tensors of autograd's "
                "worker threads to the backward() line) and CuPy's arrays (recorded as blocks of CuPy's memory "
                "pool)");
  run->add_flag("--no-symbolize", options->no_symbolize,
                "Leave stacks as raw addresses (symbolize later with `gpumemtrace symbolize`)");
  run->add_flag("-q,--quiet", options->quiet, "Print nothing but errors");
  run->add_flag("--no-nvtx-capture", options->no_nvtx_capture,
                "Do not record the app's NVTX ranges (leave NVTX_INJECTION64_PATH as it is)");
  run->add_flag("--nvtx-emit", options->nvtx_emit,
                "Emit gpumemtrace's own NVTX markers (failed allocations, live-bytes peak steps), ranges (start-up, "
                "flushes, shutdown) and a live-bytes counter per device in the domain \"gpumemtrace\", for the "
                "NVTX tool we chain to (Nsight Systems)");
  run->add_option("--nvtx-peak-step", options->nvtx_peak_step,
                  "With --nvtx-emit: a marker each time live bytes pass a new multiple of BYTES (0: none; default "
                  "1073741824, 1 GiB)")
      ->option_text("BYTES");
  // No positional option: with prefix_command, CLI11 hands the app's argv over verbatim as remaining();
  // after "--" main() has already taken it (set_run_app_argv).
  return [options, run] {
    std::vector<std::string> rest = run->remaining();
    // prefix_command lets unknown options through as "remaining": before the app's name they are ours.
    bool unknown_option = g_app_argv_after_separator ? !rest.empty() : (!rest.empty() && rest.front()[0] == '-');
    if (unknown_option) {
      fmt::print(stderr, "gpumemtrace: unknown option '{}' for run; see gpumemtrace run --help\n", rest.front());
      return kExitRunFailed;
    }
    options->command = g_app_argv_after_separator ? *g_app_argv_after_separator : rest;
    if (options->command.empty()) {
      fmt::print(stderr, "gpumemtrace: run needs the application to start: gpumemtrace run [options] -- app args\n");
      return kExitRunFailed;
    }
    return gmt::cli::run(*options);
  };
}

}  // namespace gmt::cli
