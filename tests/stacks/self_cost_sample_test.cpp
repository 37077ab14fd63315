// The self-cost sample (recorder/self_cost.h): one event in kSelfCostSampleEvery on average, at varying gaps, so
// that a program whose events repeat with a fixed period does not have the same few places timed every time.
#include <gtest/gtest.h>

#include <set>

#include "recorder/self_cost.h"

namespace gmt::recorder {
namespace {

TEST(SelfCostSampleTest, OneEventInSixtyFourOnAverageAtVaryingGaps) {
  constexpr int kEvents = 64 * 20'000;
  int sampled = 0, since_last = 0;
  std::set<int> gaps;
  for (int i = 0; i < kEvents; ++i) {
    ++since_last;
    if (!self_cost_sample_this_event()) continue;
    ++sampled;
    if (sampled > 1) gaps.insert(since_last);
    since_last = 0;
  }
  EXPECT_NEAR(sampled, kEvents / static_cast<int>(kSelfCostSampleEvery), kEvents / kSelfCostSampleEvery / 20);
  EXPECT_GE(*gaps.begin(), static_cast<int>(kSelfCostSampleEvery / 2));
  EXPECT_LT(*gaps.rbegin(), static_cast<int>(3 * kSelfCostSampleEvery / 2));
  EXPECT_GT(gaps.size(), kSelfCostSampleEvery / 2);  // not one fixed period
}

// A step of 1204 events (bench/torch_step.py's train step): every position of the step is sampled over many
// steps, where a fixed gap of 64 reaches only the positions of one residue class.
TEST(SelfCostSampleTest, EveryPlaceOfARepeatingStepGetsSampled) {
  constexpr int kStep = 1204;
  std::set<int> places;
  for (int step = 0; step < 2000; ++step) {
    for (int place = 0; place < kStep; ++place) {
      if (self_cost_sample_this_event()) places.insert(place);
    }
  }
  EXPECT_GT(places.size(), static_cast<size_t>(kStep * 9 / 10));
}

// The walk phase's long tail (fresh walks) is counted apart, so that the stored answers' check is read alone; a
// preempted sample counts in neither.
TEST(SelfCostPhasesTest, LongWalksAreCountedApart) {
  const SelfCostTotals before = self_cost_totals();
  add_self_cost_phases({500, 100, 0, 50, 20});
  add_self_cost_phases({700, 100, 0, 50, 20});
  add_self_cost_phases({kLongWalkNs + 6000, 100, 900, 50, 20});
  add_self_cost_phases({300'000, 0, 0, 0, 0});  // preempted
  const SelfCostTotals after = self_cost_totals();
  EXPECT_EQ(after.phase_samples - before.phase_samples, 3u);
  EXPECT_EQ(after.long_walks - before.long_walks, 1u);
  EXPECT_EQ(after.long_walk_ns - before.long_walk_ns, kLongWalkNs + 6000);
  EXPECT_EQ(after.phase_ns[0] - before.phase_ns[0], 500 + 700 + kLongWalkNs + 6000);
}

}  // namespace
}  // namespace gmt::recorder
