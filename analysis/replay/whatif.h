// `gpumemtrace whatif`: would another setting of PyTorch's caching allocator have avoided this trace's OOM, and what
// would peak reserved memory have been? The recorded run first, then the self-check (the replay under the recorded
// settings must reproduce every segment action and the peak to the byte before anything is predicted), then one
// replay per setting, run in parallel (one setting per core).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/replay/replay_run.h"

namespace gmt::replay {

// Why a trace cannot be replayed: each has its own exit code (cli/exit_codes.h).
enum class NotReplayable { NoTensorBlocks, LostBlockEvents, CudaMallocAsync, UnknownDevice, UncheckedTorchVersion };

class NotReplayableError : public std::runtime_error {
 public:
  NotReplayableError(NotReplayable why, const std::string& message) : std::runtime_error(message), why(why) {}
  NotReplayable why;
};

// A torch release whose allocator policy the replay was checked against, and how (docs/analysis.md, "What-if
// replay", "Torch versions"). A trace of any other torch, or of one it does not name, is refused unless forced.
struct CheckedTorchRelease {
  const char* release;  // major.minor, as torch.__version__ starts
  const char* how;
};
extern const std::vector<CheckedTorchRelease> kCheckedTorchReleases;
// The entry whose release `version` ("2.11.0+cu130") belongs to; nullptr for another or an unknown version.
const CheckedTorchRelease* checked_torch_release(const std::optional<std::string>& version);
// "2.11" or "2.11, 2.12": the releases of kCheckedTorchReleases.
std::string checked_torch_releases();

struct WhatIfOptions {
  std::vector<std::string> alloc_confs;  // --alloc-conf, in order
  bool sweep = false;                    // the standard grid (kSweepSettings)
  std::optional<int64_t> device;         // default: the device of the first OOM, else the first with tensor blocks
  std::optional<uint64_t> capacity;      // --capacity: overrides the trace's
  unsigned threads = 0;                  // 0: one per core
  // Read the device's actions into memory once and replay every setting from there (40 B per action) when the trace
  // has at most this many events; above it each setting reads the trace itself (memory O(live blocks)).
  uint64_t preload_max_events = 20'000'000;
  bool force_torch_version = false;  // replay a trace of a torch outside kCheckedTorchReleases (--force-torch-version)
  bool settings_only_if_exact = false;  // skip the settings when the self-check fails (report's use: no answer then)
  bool only_with_oom = false;           // replay nothing when the trace has no PyTorch OOM (report's use)
  // Replay the settings only up to the first recorded OOM, and not at all when no allocator could have served it
  // (the bytes held then plus the request exceed the capacity): report's use.
  bool first_oom_only = false;
};

// The grid of --sweep (issue 37): the default, expandable segments, max_split_size_mb 128 and 512, the rounding
// divisions, garbage collection (a no-op without a memory fraction) and the non-split rounding limit.
extern const std::vector<std::string> kSweepSettings;
// The settings `report` tries for a PyTorch OOM, beside its analysis: the four of the sweep that change the most (the
// default is the self-check; cudaMallocAsync gives no verdict; garbage collection needs a memory fraction; the
// bucketed divisions and the non-split rounding limit only matter for requests of hundreds of MiB).
extern const std::vector<std::string> kReportSettings;

struct SettingRow {
  std::string label;                 // the settings text, "default" for none
  std::optional<std::string> error;  // PyTorch would refuse these settings (then nothing else is set)
  std::optional<std::string> note;   // e.g. "no-op: no memory fraction was set"
  ReplayResult result;
};

struct WhatIfReport {
  std::string trace_path;
  int64_t device = 0;
  std::string recorded_settings;   // the text, "default" for none
  bool settings_recorded = false;  // meta torch_alloc_conf (v10); else the defaults are assumed
  std::optional<std::string> torch_version;
  std::optional<std::string> torch_git_version;
  bool torch_version_checked = false;  // torch_version is of a release in kCheckedTorchReleases (else it was forced)
  std::optional<uint64_t> device_total;
  std::optional<uint64_t> capacity;  // the device's bytes for PyTorch (what a cudaMalloc or map may take)
  std::string capacity_source;       // one sentence: where the capacity comes from and whether it is a bound
  // PyTorch's own limit from a per-process memory fraction below 1 (allowed_memory_maximum = fraction * the device's
  // total), when one was in force at the first OOM (or, without an OOM, set last). Every replay applies it itself,
  // as the recorded calls set it; it is the limit that decides the OOM whenever it is below the capacity.
  std::optional<uint64_t> fraction_limit;
  std::string fraction_limit_source;
  ReplayResult self_check;  // its `recorded` holds the recording's own figures
  bool self_check_exact = false;
  std::vector<SettingRow> settings;
  std::string settings_skipped;  // why no setting was replayed, when none was although some were asked for
  double replay_seconds = 0;     // wall time of all replays
  uint64_t actions = 0;          // actions read by the self-check
};

// Throws NotReplayableError when the trace's PyTorch actions cannot be replayed (cudaMallocAsync, no tensor blocks,
// lost events), with the reason.
void refuse_unless_replayable(const analysis::TraceFile& trace, const analysis::TorchReplayFacts& facts);

// The self-check's inputs for `device`: the recorded settings (the defaults where the trace has none) and their
// later changes, the device's total memory. Throws analysis::TraceError when PyTorch would refuse the settings.
ReplayInputs self_check_inputs(const analysis::TraceFile& trace, const analysis::TorchReplayFacts& facts,
                               int64_t device);

// Reads the trace and runs the replays. Throws analysis::TraceError (unreadable trace), NotReplayableError (also for a
// torch version outside kCheckedTorchReleases, unless options.force_torch_version).
WhatIfReport run_whatif(const std::string& trace_path, const WhatIfOptions& options);

// The setting with the lowest predicted peak reserved that avoids every recorded OOM reached (or, without an OOM,
// lowers the peak most), among the rows that predicted to the end or to an avoided fatal OOM; nullptr when none
// does better than the recorded run.
const SettingRow* best_setting(const WhatIfReport& report);

}  // namespace gmt::replay
