// `whatif` on trace files written with the real schema: the refusals (each with its own reason), the rows of a
// fragmentation OOM that expandable segments avoid, settings and calls recorded in a v10 trace, and the JSON.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "analysis/render/render_whatif.h"
#include "analysis/replay/whatif.h"
#include "trace_builder.h"

namespace gmt::replay {
namespace {

using schema::Api;
using schema::EventKind;
using test_support::TraceBuilder;

constexpr int64_t MiB = 1048576;
constexpr int64_t S1 = 0x7f0000000000;

// A PyTorch allocator event as the recorder writes it (recorder/framework_blocks.cpp).
void torch_event(TraceBuilder& trace, int64_t time, EventKind kind, Api api, int64_t address, int64_t size,
                 int64_t device = 0, int64_t handle = 0) {
  test_support::EventRow row;
  row.time_ns = time;
  row.kind = kind;
  row.api = static_cast<int64_t>(api);
  row.memory_kind = static_cast<int64_t>(kind == EventKind::AllocatorCall ? schema::MemoryKind::None
                                                                          : schema::MemoryKind::TensorBlock);
  row.device = device;
  row.address = address;
  row.size = size;
  row.handle = handle;
  row.source = static_cast<int64_t>(schema::Source::TorchAllocator);
  if (kind == EventKind::AllocFailed) row.error = 2;
  trace.event(row);
}

// The fragmentation OOM of replay_self_check_test.cpp as a trace: 3 MiB kept in a 20 MiB segment, 16 MiB freed
// behind it, 30 MiB asked for with 25 MiB free on an 80 GiB device.
void fragmenting_trace(TraceBuilder& trace, bool v10 = true) {
  trace.meta(schema::meta::kTensorBlocks, "1");
  trace.meta(schema::meta::kEventsTimeOrdered, "1");
  if (v10) {
    trace.meta(schema::meta::kTorchAllocConf, "");
    trace.meta(schema::meta::kTorchVersion, "2.11.0+cu130");
  }
  trace.exec("INSERT INTO devices(ordinal, name, total_bytes) VALUES (0, 'NVIDIA H200', 85899345920)");
  torch_event(trace, 10, EventKind::SegmentAlloc, Api::torchSegmentAlloc, S1, 20 * MiB);
  torch_event(trace, 11, EventKind::Alloc, Api::torchBlockAlloc, S1, 3 * MiB);
  torch_event(trace, 12, EventKind::Alloc, Api::torchBlockAlloc, S1 + 3 * MiB, 16 * MiB);
  torch_event(trace, 13, EventKind::Free, Api::torchBlockFree, S1 + 3 * MiB, 0);
  if (!v10) trace.alloc_failed(14, 30 * MiB, 2, 0, 25 * MiB, 80 * 1024 * MiB);  // cudaMalloc's failure
  // v10 stores the device's free bytes in the OOM's address; a v9 trace has 0 there and a CUDA-level failure.
  torch_event(trace, 14, EventKind::AllocFailed, Api::torchBlockAlloc, v10 ? 25 * MiB : 0, 30 * MiB);
}

TEST(ReplayWhatIfTest, RefusesTracesItCannotReplayWithTheReason) {
  auto reason = [](TraceBuilder& trace) -> std::optional<NotReplayable> {
    trace.close();
    try {
      run_whatif(trace.path(), {});
    } catch (const NotReplayableError& e) {
      return e.why;
    }
    return std::nullopt;
  };
  TraceBuilder no_blocks;
  no_blocks.alloc(10, S1, 20 * MiB);
  EXPECT_EQ(reason(no_blocks), NotReplayable::NoTensorBlocks);

  TraceBuilder lost;
  fragmenting_trace(lost);
  lost.meta(schema::meta::kDroppedEvents, "3");
  EXPECT_EQ(reason(lost), NotReplayable::LostBlockEvents);

  TraceBuilder async;
  async.meta(schema::meta::kTensorBlocks, "0");
  async.meta(schema::meta::kTensorBlocksNote, "PyTorch's allocator backend is cudaMallocAsync, which calls no trace "
                                              "trackers; PYTORCH_CUDA_ALLOC_CONF=backend:native tracks tensors");
  EXPECT_EQ(reason(async), NotReplayable::CudaMallocAsync);

  TraceBuilder fine;
  fragmenting_trace(fine);
  EXPECT_EQ(reason(fine), std::nullopt);
}

TEST(ReplayWhatIfTest, TheSweepFindsTheSettingThatAvoidsTheOom) {
  TraceBuilder trace;
  fragmenting_trace(trace);
  trace.close();
  WhatIfOptions options;
  options.sweep = true;
  options.threads = 2;
  const WhatIfReport report = run_whatif(trace.path(), options);
  EXPECT_TRUE(report.self_check_exact) << report.self_check.divergence;
  EXPECT_EQ(report.capacity, uint64_t(45 * MiB));
  EXPECT_EQ(report.torch_version, "2.11.0+cu130");
  ASSERT_EQ(report.settings.size(), kSweepSettings.size());
  auto row = [&](const std::string& label) -> const SettingRow& {
    for (const SettingRow& r : report.settings) {
      if (r.label == label) return r;
    }
    ADD_FAILURE() << "no row " << label;
    return report.settings.front();
  };
  EXPECT_TRUE(row("default").result.ooms.at(0).replayed_oom);
  EXPECT_FALSE(row("expandable_segments:True").result.ooms.at(0).replayed_oom);
  EXPECT_EQ(row("expandable_segments:True").result.peak_reserved, uint64_t(40 * MiB));
  // max_split_size_mb:128 changes nothing here: 30 MiB and the blocks are all below it.
  EXPECT_TRUE(row("max_split_size_mb:128").result.ooms.at(0).replayed_oom);
  EXPECT_EQ(row("garbage_collection_threshold:0.8").note,
            "no-op: garbage collection only runs with a memory fraction set, and none was");
  EXPECT_EQ(row("backend:cudaMallocAsync").result.peak_reserved, uint64_t(19 * MiB));  // 3 + 16 MiB live at once
  const SettingRow* best = best_setting(report);
  ASSERT_NE(best, nullptr);
  EXPECT_EQ(best->label, "expandable_segments:True");
  EXPECT_EQ(analysis::describe_best_setting(report),
            "Best setting: PYTORCH_ALLOC_CONF=expandable_segments:True avoids the OOM at event 5 (peak reserved "
            "40.00 MiB, recorded 20.00 MiB); the trace ends there");

  const nlohmann::json json = nlohmann::json::parse(analysis::render_whatif_json(report));
  EXPECT_EQ(json["self_check"]["exact"], true);
  EXPECT_EQ(json["self_check"]["segment_actions_matched"], 1);
  EXPECT_EQ(json["recorded"]["peak_reserved_bytes"], 20 * MiB);
  EXPECT_EQ(json["best_setting"], "expandable_segments:True");
  const std::string text = analysis::render_whatif_text(report);
  EXPECT_NE(text.find("self-check: exact (1 segment actions, 2 block addresses)"), std::string::npos) << text;
  EXPECT_NE(text.find("no OOM at this request; the trace ends here"), std::string::npos) << text;
}

TEST(ReplayWhatIfTest, TheRecordedMemoryFractionIsTheLimitItNames) {
  TraceBuilder trace;
  // set_per_process_memory_fraction(0.5) before the run: PyTorch may reserve 40 GiB of the 80 GiB device, whatever
  // the device had free at the OOM (45 MiB here: the fraction is not what failed, but it is the limit in force).
  torch_event(trace, 5, EventKind::AllocatorCall, Api::torchSetMemoryFraction, 0, 0x3fe0000000000000);
  fragmenting_trace(trace);
  trace.close();
  WhatIfOptions options;
  options.alloc_confs = {""};
  const WhatIfReport report = run_whatif(trace.path(), options);
  EXPECT_TRUE(report.self_check_exact) << report.self_check.divergence;
  EXPECT_EQ(report.self_check.recorded.memory_fraction, 0.5);
  EXPECT_EQ(report.fraction_limit, uint64_t(40960 * MiB));
  EXPECT_EQ(report.capacity, uint64_t(45 * MiB));
  const std::string text = analysis::render_whatif_text(report);
  EXPECT_NE(
      text.find("Limit for PyTorch: 40.00 GiB (42949672960 B): set_per_process_memory_fraction(0.5) at event "
                "1, of the device's 85899345920 B: PyTorch's allowed_memory_maximum, checked before any CUDA "
                "call, in force at the first OOM\nDevice capacity: 45.00 MiB (47185920 B): calibrated by the OOM"),
      std::string::npos)
      << text;
  const nlohmann::json json = nlohmann::json::parse(analysis::render_whatif_json(report));
  EXPECT_EQ(json["memory_fraction_limit_bytes"], 40960 * MiB);
}

TEST(ReplayWhatIfTest, AnUncheckedTorchIsReplayedOnlyWhenForcedAndNamesNoSetting) {
  TraceBuilder trace;
  fragmenting_trace(trace);
  trace.meta(schema::meta::kTorchVersion, "2.9.1+cu128");
  trace.close();
  WhatIfOptions options;
  options.alloc_confs = {"expandable_segments:True"};
  try {
    run_whatif(trace.path(), options);
    ADD_FAILURE() << "torch 2.9.1 was replayed without --force-torch-version";
  } catch (const NotReplayableError& e) {
    EXPECT_EQ(e.why, NotReplayable::UncheckedTorchVersion);
    EXPECT_NE(std::string(e.what()).find("was recorded with torch 2.9.1+cu128: the replay's allocator policy has "
                                         "been checked for torch 2.11 only. --force-torch-version replays it anyway"),
              std::string::npos)
        << e.what();
  }
  options.force_torch_version = true;
  const WhatIfReport report = run_whatif(trace.path(), options);
  EXPECT_FALSE(report.torch_version_checked);
  EXPECT_TRUE(report.self_check_exact) << report.self_check.divergence;
  ASSERT_NE(best_setting(report), nullptr);                // expandable segments avoid the OOM, as for 2.11 ...
  EXPECT_EQ(analysis::describe_best_setting(report), "");  // ... but an unchecked policy names no setting
  const std::string text = analysis::render_whatif_text(report);
  EXPECT_NE(text.find("Torch version: 2.9.1+cu128 is not a release the policy was checked for (2.11); replayed "
                      "because --force-torch-version was given, and no best setting is named"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("No best setting named: torch 2.9.1+cu128's allocator policy has not been checked (checked: "
                      "2.11)"),
            std::string::npos)
      << text;
  const nlohmann::json json = nlohmann::json::parse(analysis::render_whatif_json(report));
  EXPECT_EQ(json["torch_version_checked"], false);
  EXPECT_TRUE(json["best_setting"].is_null());
  EXPECT_NE(checked_torch_release(std::string("2.11.0+cu130")), nullptr);
  EXPECT_NE(checked_torch_release(std::string("2.11.0a0+git70d99e9")), nullptr);
  EXPECT_EQ(checked_torch_release(std::string("2.110.0")), nullptr);
  EXPECT_EQ(checked_torch_release(std::string("2.1.0")), nullptr);
  EXPECT_EQ(checked_torch_release(std::nullopt), nullptr);
}

TEST(ReplayWhatIfTest, AnOlderTraceIsCalibratedFromTheCudaLevelFailure) {
  test_support::TraceBuilderOptions v9;
  v9.user_version = 9;
  TraceBuilder trace(v9);
  fragmenting_trace(trace, /*v10=*/false);
  trace.close();
  WhatIfOptions options;
  options.alloc_confs = {"expandable_segments:True", "max_split_size_mb:10"};
  // A v9 trace does not name its torch: refused unless forced (exit 10 in the CLI).
  try {
    run_whatif(trace.path(), options);
    ADD_FAILURE() << "a trace that does not name its torch was replayed";
  } catch (const NotReplayableError& e) {
    EXPECT_EQ(e.why, NotReplayable::UncheckedTorchVersion);
    EXPECT_NE(std::string(e.what()).find("was recorded with a torch it does not name (recorded before schema v10): "
                                         "the replay's allocator policy has been checked for torch 2.11 only"),
              std::string::npos)
        << e.what();
  }
  options.force_torch_version = true;
  const WhatIfReport report = run_whatif(trace.path(), options);
  EXPECT_FALSE(report.torch_version_checked);
  EXPECT_FALSE(report.settings_recorded);
  EXPECT_EQ(report.capacity, uint64_t(45 * MiB));
  ASSERT_EQ(report.settings.size(), 2u);
  EXPECT_FALSE(report.settings[0].result.ooms.at(0).replayed_oom);
  EXPECT_EQ(report.settings[1].error, "PyTorch would refuse it: max_split_size_mb too small, must be >= 20");
}

TEST(ReplayWhatIfTest, RecordedSettingsCallsAndEmptyCacheAreReplayed) {
  TraceBuilder trace;
  trace.meta(schema::meta::kTensorBlocks, "1");
  trace.meta(schema::meta::kTorchVersion, "2.11.0a0+git70d99e9");
  trace.meta(schema::meta::kTorchAllocConf, "max_split_size_mb:64");
  trace.meta(std::string(schema::meta::kTorchAllocConfCallPrefix) + "0", "expandable_segments:True");
  torch_event(trace, 10, EventKind::SegmentAlloc, Api::torchSegmentAlloc, S1, 20 * MiB);
  torch_event(trace, 11, EventKind::Alloc, Api::torchBlockAlloc, S1, 3 * MiB);
  torch_event(trace, 12, EventKind::Free, Api::torchBlockFree, S1, 0);
  torch_event(trace, 13, EventKind::AllocatorCall, Api::torchEmptyCache, 0, 0, -1);
  torch_event(trace, 14, EventKind::SegmentFree, Api::torchSegmentFree, S1, 20 * MiB);
  torch_event(trace, 15, EventKind::AllocatorCall, Api::torchSetAllocatorSettings, 0, 0, -1, 0);
  torch_event(trace, 16, EventKind::SegmentAlloc, Api::torchSegmentMap, S1 + 100 * MiB, 20 * MiB);
  torch_event(trace, 17, EventKind::Alloc, Api::torchBlockAlloc, S1 + 100 * MiB, 3 * MiB);
  trace.close();
  WhatIfOptions options;
  options.alloc_confs = {""};
  const WhatIfReport report = run_whatif(trace.path(), options);
  EXPECT_TRUE(report.settings_recorded);
  EXPECT_EQ(report.recorded_settings, "max_split_size_mb:64");
  EXPECT_TRUE(report.self_check_exact) << report.self_check.divergence;
  EXPECT_EQ(report.self_check.segment_actions_matched, 3u);
  EXPECT_TRUE(report.self_check.inferred_empty_cache.empty());
  // The default row follows the program's own _set_allocator_settings call as well: 20 MiB at most at once.
  EXPECT_EQ(report.settings.at(0).result.peak_reserved, uint64_t(20 * MiB));
}

}  // namespace
}  // namespace gmt::replay
