// The allocator on its own, over a made-up address range (the heap never touches memory).
#include <gtest/gtest.h>

#include <vector>

#include "sim_heap.h"

namespace gmt::sim {
namespace {

constexpr std::uintptr_t kBase = 0x7f0000000000;
constexpr std::size_t kKiB = 1024;

TEST(SimHeap, RoundsUpToTheGrain) {
  EXPECT_EQ(Heap::round_up(0), 512u);
  EXPECT_EQ(Heap::round_up(1), 512u);
  EXPECT_EQ(Heap::round_up(512), 512u);
  EXPECT_EQ(Heap::round_up(513), 1024u);
  EXPECT_FALSE(Heap::round_up(~std::size_t{0}).has_value());
}

TEST(SimHeap, CapacityIsRoundedDownToTheGrain) {
  const Heap heap(kBase, 3000);
  EXPECT_EQ(heap.capacity(), 2560u);
  EXPECT_EQ(heap.free_bytes(), 2560u);
  EXPECT_EQ(heap.free_block_count(), 1u);
}

TEST(SimHeap, FirstFitHandsOutConsecutiveAlignedBlocksAndRecordsRounding) {
  Heap heap(kBase, 64 * kKiB);
  const auto a = heap.allocate(1, /*tag=*/7);
  const auto b = heap.allocate(700);
  const auto c = heap.allocate(512);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(*a, kBase);
  EXPECT_EQ(*b, kBase + 512);
  EXPECT_EQ(*c, kBase + 512 + 1024);
  EXPECT_EQ(heap.used(), 512u + 1024u + 512u);

  const auto record = heap.find_containing(*b + 800);  // inside b's rounding slack
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->address, *b);
  EXPECT_EQ(record->requested, 700u);
  EXPECT_EQ(record->size, 1024u);
  EXPECT_EQ(heap.find_containing(*a)->tag, 7u);
  EXPECT_FALSE(heap.find_containing(kBase + 64 * kKiB - 1).has_value());  // free space
}

TEST(SimHeap, ReleaseRejectsUnknownAndInteriorAddresses) {
  Heap heap(kBase, 64 * kKiB);
  const auto a = heap.allocate(4096);
  ASSERT_TRUE(a);
  EXPECT_FALSE(heap.release(*a + 512).has_value());
  EXPECT_FALSE(heap.release(kBase + 32 * kKiB).has_value());
  EXPECT_TRUE(heap.release(*a).has_value());
  EXPECT_FALSE(heap.release(*a).has_value());  // double free
  EXPECT_EQ(heap.used(), 0u);
}

TEST(SimHeap, FailsWhenNoSingleBlockFitsEvenIfTheFreeTotalWould) {
  Heap heap(kBase, 8 * kKiB);
  std::vector<std::uintptr_t> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(*heap.allocate(kKiB));
  EXPECT_FALSE(heap.allocate(1).has_value());                                        // full
  for (int i = 0; i < 8; i += 2) heap.release(blocks[static_cast<std::size_t>(i)]);  // every other one
  EXPECT_EQ(heap.free_bytes(), 4 * kKiB);
  EXPECT_EQ(heap.largest_free_block(), kKiB);
  EXPECT_FALSE(heap.allocate(2 * kKiB).has_value());
  EXPECT_TRUE(heap.allocate(kKiB).has_value());  // but a fitting request still succeeds
}

TEST(SimHeap, CoalescesWithBothNeighbours) {
  Heap heap(kBase, 4 * kKiB);
  const auto a = *heap.allocate(kKiB);
  const auto b = *heap.allocate(kKiB);
  const auto c = *heap.allocate(kKiB);
  const auto d = *heap.allocate(kKiB);
  heap.release(a);
  heap.release(c);
  EXPECT_EQ(heap.free_block_count(), 2u);
  heap.release(b);  // joins a (before) and c (after)
  EXPECT_EQ(heap.free_block_count(), 1u);
  EXPECT_EQ(heap.largest_free_block(), 3 * kKiB);
  EXPECT_EQ(heap.allocate(3 * kKiB), a);
  heap.release(a);
  heap.release(d);
  EXPECT_EQ(heap.free_block_count(), 1u);
  EXPECT_EQ(heap.largest_free_block(), 4 * kKiB);
}

TEST(SimHeap, FirstFitPrefersTheLowestAddress) {
  Heap heap(kBase, 16 * kKiB);
  const auto a = *heap.allocate(2 * kKiB);
  ASSERT_TRUE(heap.allocate(kKiB));  // keeps the holes at a and c apart
  const auto c = *heap.allocate(2 * kKiB);
  ASSERT_TRUE(heap.allocate(kKiB));  // keeps c apart from the free tail
  heap.release(c);
  heap.release(a);
  EXPECT_EQ(heap.allocate(kKiB), a);         // both holes fit; the lower one wins
  EXPECT_EQ(heap.allocate(kKiB), a + kKiB);  // the rest of the same hole
  EXPECT_EQ(heap.allocate(kKiB), c);
}

TEST(SimHeap, ClearForgetsEverything) {
  Heap heap(kBase, 4 * kKiB);
  heap.allocate(kKiB);
  heap.allocate(kKiB);
  heap.clear();
  EXPECT_EQ(heap.used(), 0u);
  EXPECT_EQ(heap.allocation_count(), 0u);
  EXPECT_EQ(heap.allocate(4 * kKiB), kBase);
}

TEST(SimHeap, ZeroCapacityHeapRefusesEverything) {
  Heap heap;
  EXPECT_FALSE(heap.allocate(1).has_value());
  EXPECT_FALSE(heap.in_range(0));
}

}  // namespace
}  // namespace gmt::sim
