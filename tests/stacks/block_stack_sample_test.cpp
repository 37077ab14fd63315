// Sampled block stacks (recorder/block_stack_sample.h): blocks of at least the sample size always take their stack,
// smaller ones one per sample size allocated on average, at gaps that vary, so that a step that repeats its
// allocations does not have the same few blocks sampled every time.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "recorder/block_stack_sample.h"
#include "recorder/settings.h"

namespace gmt::recorder {
namespace {

class BlockStackSampleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_block_stack_sample_for_testing(12345);
    settings().block_stack_sample_bytes = kEvery;
  }
  void TearDown() override { settings().block_stack_sample_bytes = 0; }
  static constexpr uint64_t kEvery = 64 * 1024;
};

TEST_F(BlockStackSampleTest, EveryBlockTakesItsStackWithoutASample) {
  settings().block_stack_sample_bytes = 0;
  for (uint64_t size : {1ull, 512ull, 4096ull, 1ull << 20}) EXPECT_TRUE(take_block_stack(size)) << size;
}

TEST_F(BlockStackSampleTest, BlocksOfTheSampleSizeOrMoreAlwaysTakeTheirStackAndLeaveTheCountdownAlone) {
  ASSERT_FALSE(take_block_stack(1));  // draws the first distance (~64 KiB: one byte is sampled with p ~ 1.5e-5)
  const int64_t before = t_bytes_before_block_stack;
  for (int i = 0; i < 1000; ++i) {
    EXPECT_TRUE(take_block_stack(kEvery));
    EXPECT_TRUE(take_block_stack(kEvery * 16 + 3));
  }
  EXPECT_EQ(t_bytes_before_block_stack, before);
}

// A Poisson process over the bytes: a block of size s is sampled with probability 1 - exp(-s / kEvery).
TEST_F(BlockStackSampleTest, SmallBlocksAreSampledInProportionToTheirBytes) {
  constexpr int kBlocks = 200'000;
  for (uint64_t size : {512ull, 4096ull, 16384ull}) {
    int sampled = 0;
    for (int i = 0; i < kBlocks; ++i) sampled += take_block_stack(size);
    const double expected = kBlocks * (1.0 - std::exp(-static_cast<double>(size) / kEvery));
    EXPECT_NEAR(sampled, expected, 5 * std::sqrt(expected)) << size;  // five standard deviations
  }
}

// A step of 1204 block allocations of 8 KiB: over many steps every place of the step is sampled, where a fixed
// countdown of 64 KiB would sample one place in eight, the same ones each step.
TEST_F(BlockStackSampleTest, EveryPlaceOfARepeatingStepGetsSampled) {
  constexpr int kStep = 1204;
  std::set<int> places;
  std::set<int> gaps;
  int since_last = 0;
  for (int step = 0; step < 400; ++step) {
    for (int place = 0; place < kStep; ++place) {
      ++since_last;
      if (!take_block_stack(8192)) continue;
      places.insert(place);
      gaps.insert(since_last);
      since_last = 0;
    }
  }
  EXPECT_EQ(places.size(), static_cast<size_t>(kStep));
  EXPECT_GT(gaps.size(), 20u);  // not one fixed period
}

}  // namespace
}  // namespace gmt::recorder
