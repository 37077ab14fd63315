#include "analysis/replay/whatif.h"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "analysis/read/devices.h"
#include "analysis/read/events.h"
#include "analysis/read/torch_actions.h"
#include "schema/trace_schema.h"

namespace gmt::replay {

const std::vector<std::string> kSweepSettings = {
    "",  // the default
    "expandable_segments:True",
    "max_split_size_mb:128",
    "max_split_size_mb:512",
    "roundup_power2_divisions:4",
    "roundup_power2_divisions:[256:1,>:4]",
    "garbage_collection_threshold:0.8",
    "max_split_size_mb:512,max_non_split_rounding_mb:256",
    "backend:cudaMallocAsync",
};

const std::vector<std::string> kReportSettings = {
    "expandable_segments:True",
    "max_split_size_mb:128",
    "max_split_size_mb:512",
    "roundup_power2_divisions:4",
};

// Checked on the GPU: the self-check exact to the byte on every PyTorch program of the GPU suite (tests/gpu/
// test_gpu_whatif.py, 4b), the cross-setting predictions within their tolerance (4c). The source revisions the rules
// were read from (kPolicyCheckedAgainst) are development commits whose releases are not pinned: 001074d25084 is of
// the 2.4 era (no MemPool yet), b944315b93d3 of 2.9 or later (AcceleratorAllocatorConfig, CUDA 13 code paths); no
// release of either is listed until a trace of it passes the self-check on a GPU.
const std::vector<CheckedTorchRelease> kCheckedTorchReleases = {
    {"2.11", "torch 2.11.0+cu130 (git 70d99e998b49) on an H100, 2026-12-06: the self-check exact on the GPU suite's "
             "PyTorch programs"},
};

const CheckedTorchRelease* checked_torch_release(const std::optional<std::string>& version) {
  if (!version) return nullptr;
  for (const CheckedTorchRelease& checked : kCheckedTorchReleases) {
    const std::string release = checked.release;
    // "2.11" matches "2.11", "2.11.0", "2.11.0+cu130", "2.11.0a0+git..." but not "2.110".
    if (version->compare(0, release.size(), release) == 0 &&
        (version->size() == release.size() || (*version)[release.size()] == '.' || (*version)[release.size()] == '+' ||
         (*version)[release.size()] == 'a')) {
      return &checked;
    }
  }
  return nullptr;
}

std::string checked_torch_releases() {
  std::string out;
  for (const CheckedTorchRelease& checked : kCheckedTorchReleases)
    out += (out.empty() ? "" : ", ") + std::string(checked.release);
  return out;
}

namespace {

using analysis::TraceFile;

[[noreturn]] void refuse_unchecked_torch(const TraceFile& trace, const analysis::TorchReplayFacts& facts) {
  const std::string which = facts.torch_version ? "torch " + *facts.torch_version
                                                : std::string("a torch it does not name (recorded before schema v10)");
  throw NotReplayableError(
      NotReplayable::UncheckedTorchVersion,
      fmt::format("'{}' was recorded with {}: the replay's allocator policy has been checked for torch {} only. "
                  "--force-torch-version replays it anyway (its self-check then says whether that torch follows "
                  "the same rules)",
                  trace.path(), which, checked_torch_releases()));
}

}  // namespace

void refuse_unless_replayable(const TraceFile& trace, const analysis::TorchReplayFacts& facts) {
  const std::string& path = trace.path();
  if (facts.cuda_malloc_async || facts.alloc_conf.value_or("").find("backend:cudaMallocAsync") != std::string::npos) {
    throw NotReplayableError(
        NotReplayable::CudaMallocAsync,
        fmt::format("'{}' was recorded under PyTorch's cudaMallocAsync backend: the driver's pool decides where blocks "
                    "go and keeps its reasons, so there is no policy to replay",
                    path));
  }
  if (!facts.tensor_blocks || trace.schema_version() < 7) {
    std::string why = trace.schema_version() < 7
                          ? fmt::format("it was recorded with schema {}, before PyTorch's segments were recorded (v7)",
                                        trace.schema_version())
                          : "PyTorch's tensor blocks were not recorded" +
                                (facts.tensor_blocks_note ? " (" + *facts.tensor_blocks_note + ")" : std::string());
    throw NotReplayableError(NotReplayable::NoTensorBlocks,
                             fmt::format("'{}' cannot be replayed: {}; record it again with tensor blocks on (the "
                                         "default of `gpumemtrace run` for PyTorch programs)",
                                         path, why));
  }
  if (facts.dropped_events > 0 || facts.ring_overruns > 0) {
    throw NotReplayableError(
        NotReplayable::LostBlockEvents,
        fmt::format("'{}' cannot be replayed: {} events were lost while recording, so some of PyTorch's allocator "
                    "actions are missing and a replay would drift from the first one on",
                    path, facts.dropped_events + facts.ring_overruns));
  }
}

namespace {

std::map<int64_t, std::string> read_settings_calls(const TraceFile& trace) {
  std::map<int64_t, std::string> calls;
  for (int64_t n = 0;; ++n) {  // numbered from 0 without gaps by the recorder
    std::optional<std::string> text = analysis::read_settings_call(trace, n);
    if (!text) break;
    calls[n] = *text;
  }
  return calls;
}

int64_t choose_device(const TraceFile& trace, const analysis::TorchReplayFacts& facts, const WhatIfOptions& options) {
  if (options.device) {
    if (std::find(facts.devices.begin(), facts.devices.end(), *options.device) == facts.devices.end()) {
      throw NotReplayableError(NotReplayable::UnknownDevice,
                               fmt::format("'{}' has no tensor blocks on device {}", trace.path(), *options.device));
    }
    return *options.device;
  }
  if (facts.first_oom_device &&
      std::find(facts.devices.begin(), facts.devices.end(), *facts.first_oom_device) != facts.devices.end()) {
    return *facts.first_oom_device;
  }
  return facts.devices.front();
}

// The bytes PyTorch could have reserved, and where that figure comes from.
void settle_capacity(const TraceFile& trace, const WhatIfOptions& options, WhatIfReport& report) {
  const RecordedFigures& r = report.self_check.recorded;
  if (options.capacity) {
    report.capacity = options.capacity;
    report.capacity_source = "given with --capacity";
    return;
  }
  if (r.first_oom_event) {
    std::optional<int64_t> device_free = r.first_oom_device_free;
    if (!device_free) device_free = analysis::cuda_free_before(trace, report.device, *r.first_oom_event);
    if (device_free) {
      report.capacity = r.reserved_at_first_oom + static_cast<uint64_t>(*device_free);
      report.capacity_source = fmt::format("calibrated by the OOM at event {}: reserved then plus the device's free "
                                           "memory; memory used outside PyTorch is taken as constant",
                                           *r.first_oom_event);
      if (*report.capacity < r.peak_reserved) {
        // PyTorch held more than that earlier: memory used outside PyTorch grew before the OOM. A constant capacity
        // cannot be below what the recording reserved, so the recorded peak is taken.
        report.capacity = r.peak_reserved;
        report.capacity_source = fmt::format("the recorded peak reserved: the OOM at event {} left less (reserved "
                                             "then plus the device's free memory), so memory used outside PyTorch "
                                             "grew before it; a lower bound",
                                             *r.first_oom_event);
      }
    } else {
      report.capacity = r.reserved_at_first_oom + allocation_size(r.first_oom_request) - 1;
      report.capacity_source = fmt::format("an upper bound from the OOM at event {} (the device's free memory was not "
                                           "recorded): reserved then plus the segment that did not fit, less 1 byte",
                                           *r.first_oom_event);
    }
    return;
  }
  if (report.device_total) {
    report.capacity = report.device_total;
    report.capacity_source =
        "the device's total memory: an upper bound (the CUDA context and memory used outside "
        "PyTorch are not subtracted), so an OOM predicted here is certain, one not predicted is not";
    return;
  }
  report.capacity_source = "unknown (no device total, no OOM): no OOM is predicted";
}

// PyTorch's limit from the recorded memory fraction (setMemoryFraction: fraction * totalGlobalMem).
void settle_fraction_limit(WhatIfReport& report) {
  const RecordedFigures& r = report.self_check.recorded;
  if (!r.memory_fraction) return;
  const uint64_t total = report.device_total.value_or(kUnknownDeviceTotal);
  report.fraction_limit = static_cast<uint64_t>(*r.memory_fraction * static_cast<double>(total));
  report.fraction_limit_source = fmt::format(
      "set_per_process_memory_fraction({:.6g}) at event {}, of the device's {} B{}: PyTorch's "
      "allowed_memory_maximum, checked before any CUDA call{}",
      *r.memory_fraction, r.memory_fraction_event, total, report.device_total ? "" : " (not recorded: 80 GiB assumed)",
      r.first_oom_event ? ", in force at the first OOM" : "");
}

SettingRow replay_setting(const std::string& trace_path, int64_t device, const std::string& text,
                          const ReplayInputs& base, const RecordedFigures& recorded,
                          const std::vector<analysis::TorchAction>* preloaded) {
  SettingRow row;
  TorchAllocatorConfig config;
  if (std::optional<std::string> error = apply_alloc_conf(text, config)) {
    row.label = text;
    row.error = "PyTorch would refuse it: " + *error;
    return row;
  }
  row.label = config_label(config);
  if (config.cuda_malloc_async) {
    row.note =
        fmt::format("cannot be replayed (the driver's pool is opaque): at least {} B, the most bytes the program "
                    "requested at once",
                    recorded.peak_live_requested);
    row.result.peak_reserved = recorded.peak_live_requested;
    return row;
  }
  if (config.garbage_collection_threshold > 0 && !recorded.memory_fraction_set && !config.memory_fraction) {
    row.note = "no-op: garbage collection only runs with a memory fraction set, and none was";
  }
  ReplayInputs inputs = base;
  inputs.mode = ReplayMode::WhatIf;
  inputs.config = config;
  if (preloaded) {
    VectorActions actions(*preloaded);
    row.result = run_replay(actions, inputs);
    return row;
  }
  TraceFile trace = TraceFile::open(trace_path);  // one connection per thread
  TraceActions actions(trace, device);
  row.result = run_replay(actions, inputs);
  return row;
}

}  // namespace

ReplayInputs self_check_inputs(const TraceFile& trace, const analysis::TorchReplayFacts& facts, int64_t device) {
  ReplayInputs inputs;
  inputs.mode = ReplayMode::SelfCheck;
  if (std::optional<std::string> error = apply_alloc_conf(facts.alloc_conf.value_or(""), inputs.config)) {
    throw analysis::TraceError(
        fmt::format("'{}' names allocator settings PyTorch would refuse: {}", trace.path(), *error));
  }
  inputs.settings_calls = read_settings_calls(trace);
  for (const analysis::DeviceInfo& info : analysis::read_devices(trace)) {
    if (info.ordinal == device && info.total_bytes) inputs.device_total = static_cast<uint64_t>(*info.total_bytes);
  }
  return inputs;
}

WhatIfReport run_whatif(const std::string& trace_path, const WhatIfOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  TraceFile trace = TraceFile::open(trace_path);
  const analysis::TorchReplayFacts facts = analysis::read_torch_replay_facts(trace);
  refuse_unless_replayable(trace, facts);

  WhatIfReport report;
  report.trace_path = trace_path;
  if (options.only_with_oom && !facts.first_oom_device) return report;
  report.device = choose_device(trace, facts, options);
  report.torch_version = facts.torch_version;
  report.torch_git_version = facts.torch_git_version;
  report.torch_version_checked = checked_torch_release(facts.torch_version) != nullptr;
  if (!report.torch_version_checked && !options.force_torch_version) refuse_unchecked_torch(trace, facts);
  report.settings_recorded = facts.alloc_conf.has_value();
  ReplayInputs inputs = self_check_inputs(trace, facts, report.device);
  if (inputs.device_total) report.device_total = inputs.device_total;
  report.recorded_settings = config_label(inputs.config);
  std::vector<analysis::TorchAction> preloaded;
  const bool preload = analysis::highest_event_id(trace) <= options.preload_max_events;
  if (preload) {
    TraceActions reader(trace, report.device);
    for (analysis::TorchAction action; reader.next(action);) preloaded.push_back(action);
    VectorActions actions(preloaded);
    report.self_check = run_replay(actions, inputs);
  } else {
    TraceActions actions(trace, report.device);
    report.self_check = run_replay(actions, inputs);
  }
  const ReplayResult& self = report.self_check;
  report.actions = self.actions;
  report.self_check_exact = !self.divergence_event && self.peak_reserved == self.recorded.peak_reserved;
  settle_capacity(trace, options, report);
  settle_fraction_limit(report);

  std::vector<std::string> texts = options.alloc_confs;
  if (options.sweep) texts.insert(texts.end(), kSweepSettings.begin(), kSweepSettings.end());
  if (options.settings_only_if_exact && !report.self_check_exact && !texts.empty()) {
    texts.clear();
    report.settings_skipped = "the self-check did not reproduce the recording";
  }
  const RecordedFigures& recorded = self.recorded;
  std::optional<uint64_t> limit = report.capacity;
  if (report.fraction_limit && (!limit || *report.fraction_limit < *limit)) limit = report.fraction_limit;
  if (options.first_oom_only && recorded.first_oom_event && limit && !texts.empty() &&
      recorded.live_requested_at_first_oom + recorded.first_oom_request > *limit) {
    texts.clear();
    report.settings_skipped = "no allocator could have served the first OOM's request: the bytes held then plus "
                              "the request exceed the capacity";
  }
  ReplayInputs base = inputs;
  base.capacity = report.capacity;
  base.empty_cache_before = self.inferred_empty_cache;
  base.stop_at_first_oom = options.first_oom_only;
  report.settings.resize(texts.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < texts.size(); i = next++) {
      try {
        report.settings[i] =
            replay_setting(trace_path, report.device, texts[i], base, self.recorded, preload ? &preloaded : nullptr);
      } catch (const std::exception& error) {
        report.settings[i].label = texts[i].empty() ? "default" : texts[i];
        report.settings[i].error = error.what();
      }
    }
  };
  unsigned threads = options.threads ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<unsigned>(threads, static_cast<unsigned>(std::max<size_t>(texts.size(), 1)));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& thread : pool) thread.join();
  report.replay_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

const SettingRow* best_setting(const WhatIfReport& report) {
  const RecordedFigures& recorded = report.self_check.recorded;
  const bool had_oom = recorded.first_oom_event.has_value();
  const SettingRow* best = nullptr;
  for (const SettingRow& row : report.settings) {
    if (row.error || (row.note && row.note->rfind("cannot be replayed", 0) == 0)) continue;
    const ReplayResult& r = row.result;
    bool qualifies;
    if (had_oom) {
      qualifies = r.avoided_fatal_oom ||
                  (!r.divergence_event && !r.ooms.empty() &&
                   std::none_of(r.ooms.begin(), r.ooms.end(), [](const OomVerdict& v) { return v.replayed_oom; }));
    } else {
      qualifies = !r.divergence_event && r.peak_reserved < recorded.peak_reserved;
    }
    if (qualifies && (!best || r.peak_reserved < best->result.peak_reserved)) best = &row;
  }
  return best;
}

}  // namespace gmt::replay
