// The what-if replay's self-check on hand-built traces: PyTorch's allocator actions written out by hand from the
// source's rules (each step's comment says why the allocator does what it does), replayed under the recorded settings
// with the recorded addresses. The replay must reproduce every segment action and block address to the byte, and stop
// at the first one it does not, naming it. Then `whatif` end to end on trace files: refusals, rows, JSON.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "analysis/render/render_whatif.h"
#include "analysis/replay/replay_run.h"
#include "analysis/replay/whatif.h"
#include "trace_builder.h"

namespace gmt::replay {
namespace {

using analysis::TorchAction;
using analysis::TorchActionKind;
using test_support::TraceBuilder;

constexpr uint64_t MiB = 1048576;
constexpr uint64_t S1 = 0x7f0000000000;  // segments, as cudaMalloc returned them
constexpr uint64_t S2 = 0x7f0002000000;
constexpr uint64_t S3 = 0x7f0004000000;
constexpr uint64_t kStream = 0;

struct Script {
  std::vector<TorchAction> actions;
  int64_t id = 0;
  uint64_t stream = kStream;  // of the actions added next
  int64_t add(TorchActionKind kind, uint64_t address, uint64_t size, int64_t value = 0) {
    actions.push_back({++id, kind, address, size, stream, value});
    return id;
  }
};

// A default-settings run, worked out from CUDACachingAllocator.cpp:
Script default_run() {
  Script s;
  s.add(TorchActionKind::SegmentAlloc, S1, 20 * MiB);    // 3 MiB: large pool, 1-10 MiB -> a 20 MiB segment
  s.add(TorchActionKind::Alloc, S1, 3 * MiB);            // split: 17 MiB > 1 MiB stays free
  s.add(TorchActionKind::Alloc, S1 + 3 * MiB, 5 * MiB);  // best fit: the 17 MiB block, split again (12 MiB left)
  s.add(TorchActionKind::SegmentAlloc, S2, 14 * MiB);    // 13 MiB > 12: >= 10 MiB rounds up to 2 MiB: 14 MiB
  s.add(TorchActionKind::Alloc, S2, 13 * MiB);           // 1 MiB left is not > 1 MiB: no split
  s.add(TorchActionKind::FreeCompleted, S1, 0);          // 3 MiB free, its neighbour in use: no merge
  s.add(TorchActionKind::SegmentAlloc, S3, 2 * MiB);     // 1000 B: small pool, 2 MiB segment
  s.add(TorchActionKind::Alloc, S3, 1000);
  s.add(TorchActionKind::FreeCompleted, S1 + 3 * MiB, 0);  // merges with both neighbours: the 20 MiB segment whole
  s.add(TorchActionKind::FreeCompleted, S2, 0);
  // empty_cache(), not recorded as a call (a v9 trace): whole free large segments by (size, address), then small.
  s.add(TorchActionKind::SegmentFree, S2, 14 * MiB);
  s.add(TorchActionKind::SegmentFree, S1, 20 * MiB);
  s.add(TorchActionKind::FreeCompleted, S3, 0);  // the small segment whole again
  // 100 MiB: cudaMalloc fails, release_cached_blocks frees the small segment, the retry fails: OOM.
  s.add(TorchActionKind::SegmentFree, S3, 2 * MiB);
  s.add(TorchActionKind::Oom, 0, 100 * MiB, 300 * MiB);
  return s;
}

ReplayResult self_check(const std::vector<TorchAction>& actions, const std::string& settings = "") {
  ReplayInputs inputs;
  EXPECT_FALSE(apply_alloc_conf(settings, inputs.config));
  inputs.device_total = uint64_t{80} << 30;
  VectorActions source(actions);
  return run_replay(source, inputs);
}

TEST(ReplaySelfCheckTest, ReproducesEverySegmentAndAddressOfAHandBuiltRun) {
  const Script run = default_run();
  const ReplayResult r = self_check(run.actions);
  EXPECT_FALSE(r.divergence_event) << r.divergence;
  EXPECT_EQ(r.segment_actions_matched, 6u);
  EXPECT_EQ(r.addresses_matched, 4u);
  EXPECT_EQ(r.peak_reserved, 36 * MiB);
  EXPECT_EQ(r.recorded.peak_reserved, 36 * MiB);
  EXPECT_EQ(r.recorded.segments_at_peak, 3u);
  EXPECT_EQ(r.inferred_empty_cache, std::vector<int64_t>{13});  // before the small block's free
  ASSERT_EQ(r.ooms.size(), 1u);
  EXPECT_TRUE(r.ooms[0].replayed_oom);
  EXPECT_EQ(r.ooms[0].request, 100 * MiB);
  EXPECT_EQ(r.recorded.first_oom_device_free, 300 * MiB);
  EXPECT_EQ(r.stats.reserved, 0u);
}

TEST(ReplaySelfCheckTest, StopsAtTheFirstSegmentItDoesNotReproduce) {
  Script run = default_run();
  run.actions[3].size = 16 * MiB;  // the 13 MiB request's segment, recorded larger than the rules give
  const ReplayResult r = self_check(run.actions);
  ASSERT_TRUE(r.divergence_event);
  EXPECT_EQ(*r.divergence_event, 5);
  EXPECT_EQ(r.divergence, "the replay asks cudaMalloc for 14680064 B; the recording made segment_alloc "
                          "0x7f0002000000 (16777216 B)");
  EXPECT_EQ(r.recorded.peak_reserved, 38 * MiB);  // the recording's own figures still cover the whole trace

  Script moved = default_run();
  moved.actions[2].address = S1 + 4 * MiB;  // a block where best fit would not put it
  const ReplayResult m = self_check(moved.actions);
  ASSERT_TRUE(m.divergence_event);
  EXPECT_EQ(*m.divergence_event, 3);
  EXPECT_EQ(m.divergence, "the replay places the 5242880 B block at 0x7f0000300000; the recording at 0x7f0000400000");
}

TEST(ReplaySelfCheckTest, TheRecordedSettingsDecideWhatIsReproduced) {
  // 16 divisions per power of two keep every request of the run (3, 5, 13, 100 MiB are whole steps; 1000 B is
  // below 16 * 512 B): the same run, exactly.
  const ReplayResult r = self_check(default_run().actions, "roundup_power2_divisions:16");
  EXPECT_FALSE(r.divergence_event) << r.divergence;
  // Expandable segments map pages where the recording cudaMalloc'd a segment: the first allocation differs.
  const ReplayResult e = self_check(default_run().actions, "expandable_segments:True");
  ASSERT_TRUE(e.divergence_event);
  EXPECT_EQ(*e.divergence_event, 2);
  EXPECT_EQ(e.divergence, "the replay reserves a new 96636764160 B expandable segment; the recording did not map one");
}

TEST(ReplaySelfCheckTest, ReproducesAnExpandableRunWithItsUnmapsAndARecordedEmptyCache) {
  Script s;
  s.add(TorchActionKind::SegmentMap, S1, 20 * MiB);  // 3 MiB: one 20 MiB page of a new expandable segment
  s.add(TorchActionKind::Alloc, S1, 3 * MiB);
  s.add(TorchActionKind::SegmentMap, S1 + 20 * MiB, 20 * MiB);  // 30 MiB: the free 17 MiB grows by one page
  s.add(TorchActionKind::Alloc, S1 + 3 * MiB, 30 * MiB);
  s.add(TorchActionKind::FreeRequested, S1 + 3 * MiB, 30 * MiB);  // v10: let go, waits for another stream
  s.add(TorchActionKind::FreeCompleted, S1 + 3 * MiB, 0);
  s.add(TorchActionKind::EmptyCache, 0, 0);  // v10: the call, its unmaps after it
  s.add(TorchActionKind::SegmentUnmap, S1 + 20 * MiB, 20 * MiB);
  s.add(TorchActionKind::Alloc, S1 + 3 * MiB, 4 * MiB);  // the 17 MiB left mapped holds it
  const ReplayResult r = self_check(s.actions, "expandable_segments:True");
  EXPECT_FALSE(r.divergence_event) << r.divergence;
  EXPECT_EQ(r.segment_actions_matched, 3u);
  EXPECT_EQ(r.addresses_matched, 3u);
  EXPECT_EQ(r.peak_reserved, 40 * MiB);
  EXPECT_TRUE(r.inferred_empty_cache.empty());
  EXPECT_EQ(r.stats.reserved, 20 * MiB);
}

// Fragmentation: a 3 MiB block kept at the start of a 20 MiB segment, a 16 MiB one freed behind it, then 30 MiB
// asked for with 25 MiB free on the device. Under the defaults the 17 MiB free block is too small, a new 30 MiB
// segment does not fit, and the split segment cannot be given back: OOM. Expandable segments grow the free 17 MiB
// by one 20 MiB page instead.
Script fragmenting_run() {
  Script s;
  s.add(TorchActionKind::SegmentAlloc, S1, 20 * MiB);
  s.add(TorchActionKind::Alloc, S1, 3 * MiB);             // kept; 17 MiB free
  s.add(TorchActionKind::Alloc, S1 + 3 * MiB, 16 * MiB);  // takes the whole 17 MiB (1 MiB is not split off)
  s.add(TorchActionKind::FreeCompleted, S1 + 3 * MiB, 0);
  s.add(TorchActionKind::Oom, 0, 30 * MiB, 25 * MiB);  // cudaMalloc(30 MiB) fails; nothing whole to free
  return s;
}

TEST(ReplaySelfCheckTest, WhatIfExpandableSegmentsAvoidsTheFragmentationOom) {
  const Script run = fragmenting_run();
  const ReplayResult check = self_check(run.actions);
  ASSERT_FALSE(check.divergence_event) << check.divergence;
  EXPECT_EQ(check.peak_reserved, 20 * MiB);
  EXPECT_EQ(check.inactive_split_at_peak, 17 * MiB);
  ReplayInputs whatif;
  whatif.mode = ReplayMode::WhatIf;
  whatif.device_total = uint64_t{80} << 30;
  whatif.capacity = check.recorded.reserved_at_first_oom + 25 * MiB;  // 45 MiB, as whatif calibrates it
  {
    VectorActions source(run.actions);
    const ReplayResult same = run_replay(source, whatif);  // the defaults, with modelled addresses
    ASSERT_EQ(same.ooms.size(), 1u);
    EXPECT_TRUE(same.ooms[0].replayed_oom);
    EXPECT_EQ(same.peak_reserved, 20 * MiB);
  }
  ASSERT_FALSE(apply_alloc_conf("expandable_segments:True", whatif.config));
  VectorActions source(run.actions);
  const ReplayResult expandable = run_replay(source, whatif);
  ASSERT_EQ(expandable.ooms.size(), 1u);
  EXPECT_FALSE(expandable.ooms[0].replayed_oom);
  EXPECT_TRUE(expandable.avoided_fatal_oom);
  EXPECT_EQ(expandable.divergence, "no OOM at this request; the trace ends here");
  EXPECT_EQ(expandable.peak_reserved, 40 * MiB);  // two 20 MiB pages: 3 + 30 MiB in one growing range
}

// The allocator fuzz's runs on an H100 (tests/gpu/torch_allocator_fuzz.py, torch 2.11.0, 2026-12-06), reduced to
// the actions that made the self-check diverge, with the fuzz's own sizes and streams.
constexpr uint64_t kSide = 709036576;  // a second stream, as the fuzz's torch.cuda.Stream()

// Seed 1, events 490-507: empty_cache() frees the whole cached segments; the next request finds no block and
// cudaMallocs a 50 MiB segment, recorded right after the frees. Then a block freed after record_stream (waiting for
// another stream) is returned by the next empty_cache()'s synchronize_and_free_events before its segment is freed.
TEST(ReplaySelfCheckTest, AnEmptyCacheIsFollowedByTheNextRequestsSegment) {
  constexpr uint64_t S4 = 0x7f0008000000;
  Script s;
  s.stream = kSide;
  s.add(TorchActionKind::SegmentAlloc, S1, 20 * MiB);  // 20971251 B -> 20 MiB: >= 10 MiB, a 2 MiB multiple
  s.add(TorchActionKind::Alloc, S1, 20971251);         // the whole segment
  s.add(TorchActionKind::FreeCompleted, S1, 0);
  s.add(TorchActionKind::EmptyCache, 0, 0);
  s.add(TorchActionKind::SegmentFree, S1, 20 * MiB);
  s.add(TorchActionKind::SegmentAlloc, S3, 52428800);  // 52122142 B: 52122624 rounded, a 50 MiB segment
  s.add(TorchActionKind::Alloc, S3, 52122142);         // 306176 B left: not > 1 MiB, no split
  s.add(TorchActionKind::SegmentAlloc, S2, 20 * MiB);
  s.add(TorchActionKind::Alloc, S2, 20971251);
  s.add(TorchActionKind::FreeRequested, S2, 20971251);  // record_stream'd: waits for the other stream
  s.add(TorchActionKind::EmptyCache, 0, 0);
  s.add(TorchActionKind::FreeCompleted, S2, 0);  // synchronize_and_free_events, inside emptyCache
  s.add(TorchActionKind::SegmentFree, S2, 20 * MiB);
  s.add(TorchActionKind::SegmentAlloc, S4, 2 * MiB);  // 1000 B: the small pool has no segment left
  s.add(TorchActionKind::Alloc, S4, 1000);
  const ReplayResult r = self_check(s.actions);
  // Before 2026-12-06 the replay stopped at event 7: "after an empty_cache(), the recording has segment_alloc
  // 0x7f0004000000 (52428800 B), which the replay does not make".
  EXPECT_FALSE(r.divergence_event) << r.divergence;
  EXPECT_EQ(r.segment_actions_matched, 6u);
  EXPECT_EQ(r.addresses_matched, 4u);
  EXPECT_EQ(r.unknown_frees, 0u);
  EXPECT_TRUE(r.inferred_empty_cache.empty());
  EXPECT_EQ(r.peak_reserved, 52428800u + 20 * MiB);
  EXPECT_EQ(r.recorded.peak_reserved, 52428800u + 20 * MiB);
  EXPECT_EQ(r.stats.reserved, 52428800u + 2 * MiB);
}

// Seed 2's pattern under max_split_size_mb:20 and a memory fraction: a request that fits no cached block and would
// pass the fraction runs the whole chain, and the block that waited for another stream comes back inside it, between
// the chain's segment frees (release_available_cached_blocks, then release_cached_blocks' synchronize_and_free_events
// and release_blocks). That free_completed is the chain's, not an empty_cache() between requests.
TEST(ReplaySelfCheckTest, AFreeCompletedInsideTheOomChainIsTheChains) {
  Script s;
  s.add(TorchActionKind::SetFraction, 0, 0, 0x3fb0000000000000);  // 0.0625 of 1 GiB: 64 MiB allowed
  s.add(TorchActionKind::SegmentAlloc, S1, 22 * MiB);
  s.add(TorchActionKind::Alloc, S1, 21 * MiB);  // >= max_split_size: never split, the whole 22 MiB
  s.add(TorchActionKind::FreeCompleted, S1, 0);
  s.add(TorchActionKind::SegmentAlloc, S2, 2 * MiB);
  s.add(TorchActionKind::Alloc, S2, 1000);
  s.add(TorchActionKind::FreeRequested, S2, 1000);  // used on another stream: pending
  // 42 MiB: no cached block; 24 + 42 MiB would pass the 64 MiB allowed. release_available_cached_blocks frees the
  // oversize 22 MiB block (not enough alone), release_cached_blocks completes the pending block and frees its
  // segment, and the retry fits.
  s.add(TorchActionKind::SegmentFree, S1, 22 * MiB);
  s.add(TorchActionKind::FreeCompleted, S2, 0);
  s.add(TorchActionKind::SegmentFree, S2, 2 * MiB);
  s.add(TorchActionKind::SegmentAlloc, S3, 42 * MiB);
  s.add(TorchActionKind::Alloc, S3, 42 * MiB);
  ReplayInputs inputs;
  ASSERT_FALSE(apply_alloc_conf("max_split_size_mb:20", inputs.config));
  inputs.device_total = uint64_t{1} << 30;
  VectorActions source(s.actions);
  const ReplayResult r = run_replay(source, inputs);
  EXPECT_FALSE(r.divergence_event) << r.divergence;
  EXPECT_EQ(r.segment_actions_matched, 5u);
  EXPECT_EQ(r.addresses_matched, 3u);
  // Before 2026-12-06 the replay took the free_completed at event 9 for the sign of an unrecorded empty_cache(), freed
  // the small segment too early and stopped there ("the replay frees the segment ...; the recording did not").
  EXPECT_TRUE(r.inferred_empty_cache.empty());
  EXPECT_EQ(r.unknown_frees, 0u);
  EXPECT_EQ(r.stats.reserved, 42 * MiB);
  EXPECT_EQ(r.stats.alloc_retries, 1u);
  EXPECT_EQ(r.peak_reserved, 42 * MiB);
  EXPECT_EQ(r.recorded.peak_reserved, 42 * MiB);
  EXPECT_EQ(r.recorded.memory_fraction, 0.0625);
}

// torch.cuda.graph: the capture's first block comes from the graph's private pool (MempoolId_t {1, 0}, kept in the
// event's handle), which the replay does not model: it stops there and says so, after reproducing what came before.
TEST(ReplaySelfCheckTest, StopsAtTheFirstBlockOfAPrivatePool) {
  Script s;
  s.add(TorchActionKind::SegmentAlloc, S1, 2 * MiB);
  s.add(TorchActionKind::Alloc, S1, 8);  // capture_begin's generator state: still the default pool
  s.add(TorchActionKind::EmptyCache, 0, 0);
  s.add(TorchActionKind::SegmentAlloc, S2, 2 * MiB, int64_t{1} << 32);  // the private pool's first segment
  s.add(TorchActionKind::Alloc, S2, 1 * MiB, int64_t{1} << 32);
  const ReplayResult r = self_check(s.actions);
  ASSERT_TRUE(r.divergence_event);
  EXPECT_EQ(*r.divergence_event, 4);
  EXPECT_EQ(r.divergence, "CUDA-graph private pools are not modelled: from event 4, the first segment of memory pool "
                          "(1, 0)");
  EXPECT_EQ(r.segment_actions_matched, 1u);
  EXPECT_EQ(r.addresses_matched, 1u);
}

}  // namespace
}  // namespace gmt::replay
