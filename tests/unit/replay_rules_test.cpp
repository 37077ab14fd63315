// The what-if replay's rules against PyTorch's source (analysis/replay/torch_config.h names the functions and the
// revisions): rounding, segment sizes, settings parsing, pools, best fit, the split rules, merging, the OOM chain,
// garbage collection and expandable segments, each as a table of cases worked out from the source by hand.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "analysis/replay/torch_caching.h"
#include "analysis/replay/torch_config.h"

namespace gmt::replay {
namespace {

constexpr uint64_t MiB = 1048576;

TorchAllocatorConfig conf(const std::string& text) {
  TorchAllocatorConfig config;
  std::optional<std::string> error = apply_alloc_conf(text, config);
  EXPECT_FALSE(error) << text << ": " << error.value_or("");
  return config;
}

TEST(ReplayRulesTest, RoundSizeAsDeviceCachingAllocatorRoundSize) {
  const TorchAllocatorConfig plain;
  struct Case {
    uint64_t size, rounded;
  };
  for (const Case& c : std::vector<Case>{{0, 512},
                                         {1, 512},
                                         {511, 512},
                                         {512, 512},
                                         {513, 1024},
                                         {1200, 1536},
                                         {MiB + 1, MiB + 512},
                                         {10 * MiB - 1, 10 * MiB}}) {
    EXPECT_EQ(round_size(plain, c.size), c.rounded) << c.size;
  }
  // The source's own example: 1200 with 4 divisions between 1024 and 2048 -> 1280.
  EXPECT_EQ(roundup_power2_next_division(1200, 4), 1280u);
  EXPECT_EQ(roundup_power2_next_division(2048, 4), 2048u);  // powers of two are kept
  const TorchAllocatorConfig four = conf("roundup_power2_divisions:4");
  // Divisions apply only above kMinBlockSize * divisions (2048 B): 1200 B keeps the 512 B rule.
  EXPECT_EQ(round_size(four, 1200), 1536u);
  EXPECT_EQ(round_size(four, 3000), 3072u);             // 2048 + 4 steps of 512
  EXPECT_EQ(round_size(four, MiB + 1), MiB + MiB / 4);  // steps of 256 KiB above 1 MiB
  EXPECT_EQ(round_size(four, 5 * MiB), 5 * MiB);        // steps of 1 MiB above 4 MiB
  EXPECT_EQ(round_size(four, 5 * MiB + 1), 6 * MiB);
  EXPECT_EQ(round_size(four, 64 * MiB), 64 * MiB);
  // [>:1]: ">" fills the intervals after the last one named, none named: index 0 stays 0, the rest 1 -> no-op.
  const TorchAllocatorConfig gt_one = conf("roundup_power2_divisions:[>:1]");
  for (uint64_t size : {uint64_t{1200}, MiB + 1, 5 * MiB + 7, 300 * MiB + 1}) {
    EXPECT_EQ(round_size(gt_one, size), round_size(plain, size)) << size;
  }
}

TEST(ReplayRulesTest, DivisionIntervalsAndTheirClamping) {
  const TorchAllocatorConfig list = conf("roundup_power2_divisions:[256:1,>:4]");
  // Intervals are floor(log2(size)) - 20, clamped to [0, 15]; "256" is interval 8, and the first entry also covers
  // the intervals below it.
  EXPECT_EQ(roundup_power2_divisions(list, 1000), 1u);                // < 1 MiB: interval 0
  EXPECT_EQ(roundup_power2_divisions(list, 300 * MiB), 1u);           // interval 8
  EXPECT_EQ(roundup_power2_divisions(list, 600 * MiB), 4u);           // interval 9
  EXPECT_EQ(roundup_power2_divisions(list, uint64_t{40} << 30), 4u);  // >= 32 GiB: interval 15
  EXPECT_EQ(round_size(list, 300 * MiB + 1), 300 * MiB + 512);
  EXPECT_EQ(round_size(list, 600 * MiB + 1), 640 * MiB);  // 512 MiB + 1 step of 128 MiB
  const TorchAllocatorConfig mixed = conf("roundup_power2_divisions:[64:8,128:2,>:1]");
  EXPECT_EQ(roundup_power2_divisions(mixed, 10 * MiB), 8u);  // below 64 MiB: the first entry
  EXPECT_EQ(roundup_power2_divisions(mixed, 64 * MiB), 8u);
  EXPECT_EQ(roundup_power2_divisions(mixed, 128 * MiB), 2u);
  EXPECT_EQ(roundup_power2_divisions(mixed, 256 * MiB), 1u);
}

TEST(ReplayRulesTest, SegmentSizesAsGetAllocationSize) {
  struct Case {
    uint64_t rounded, segment;
  };
  for (const Case& c : std::vector<Case>{{512, 2 * MiB},
                                         {MiB, 2 * MiB},
                                         {MiB + 512, 20 * MiB},
                                         {10 * MiB - 512, 20 * MiB},
                                         {10 * MiB, 10 * MiB},
                                         {10 * MiB + 512, 12 * MiB},
                                         {100 * MiB + 1, 102 * MiB}}) {
    EXPECT_EQ(allocation_size(c.rounded), c.segment) << c.rounded;
  }
  EXPECT_TRUE(is_small_request(MiB));
  EXPECT_FALSE(is_small_request(MiB + 512));
}

TEST(ReplayRulesTest, SettingsParseAsPyTorchParseArgs) {
  TorchAllocatorConfig config;
  EXPECT_EQ(apply_alloc_conf("max_split_size_mb:19", config).value_or(""),
            "max_split_size_mb too small, must be >= 20");
  EXPECT_TRUE(apply_alloc_conf("garbage_collection_threshold:1.0", config));
  EXPECT_TRUE(apply_alloc_conf("roundup_power2_divisions:3", config));
  EXPECT_TRUE(apply_alloc_conf("expandable_segments:maybe", config));
  EXPECT_EQ(config.text, "");  // a refused text changes nothing

  config = conf("expandable_segments:True,max_split_size_mb:128,max_non_split_rounding_mb:256,"
                "release_lock_on_cudamalloc:True,pinned_num_register_threads:8");
  EXPECT_TRUE(config.expandable_segments);
  EXPECT_EQ(config.max_split_size, 128 * MiB);
  EXPECT_EQ(config.max_non_split_rounding_size, 256 * MiB);
  // A later call resets max_split_size, the divisions and the gc threshold, keeps the rest.
  EXPECT_FALSE(apply_alloc_conf("garbage_collection_threshold:0.6", config));
  EXPECT_EQ(config.max_split_size, UINT64_MAX);
  EXPECT_TRUE(config.expandable_segments);
  EXPECT_EQ(config.max_non_split_rounding_size, 256 * MiB);
  EXPECT_DOUBLE_EQ(config.garbage_collection_threshold, 0.6);
  EXPECT_TRUE(conf("backend:cudaMallocAsync").cuda_malloc_async);
}

// A CUDA that logs every call: "malloc SIZE", "free ADDR SIZE", "map ADDR SIZE", "unmap ADDR SIZE", addresses
// relative to the first segment (0x10000000).
class LoggingMemory : public DeviceMemory {
 public:
  explicit LoggingMemory(std::optional<uint64_t> capacity = std::nullopt) : capacity_(capacity) {}
  std::vector<std::string> log;
  uint64_t used = 0;

  std::optional<uint64_t> malloc(uint64_t size, uint64_t) override {
    if (capacity_ && used + size > *capacity_) {
      log.push_back("malloc " + mib(size) + " failed");
      return std::nullopt;
    }
    used += size;
    log.push_back("malloc " + mib(size) + " at " + mib(next_));
    const uint64_t address = kBase + next_;
    next_ += size;
    return address;
  }
  void free(uint64_t address, uint64_t size, uint64_t) override {
    used -= size;
    log.push_back("free " + mib(address - kBase) + " " + mib(size));
  }
  uint64_t reserve(uint64_t size, uint64_t) override {
    const uint64_t address = kBase + next_;
    next_ += size;
    return address;
  }
  void release_reservation(uint64_t, uint64_t) override {}
  bool map(uint64_t address, uint64_t size, uint64_t) override {
    if (capacity_ && used + size > *capacity_) return false;
    used += size;
    log.push_back("map " + mib(address - kBase) + " " + mib(size));
    return true;
  }
  void unmap(uint64_t address, uint64_t size, uint64_t) override {
    used -= size;
    log.push_back("unmap " + mib(address - kBase) + " " + mib(size));
  }
  static constexpr uint64_t kBase = 0x10000000;

 private:
  static std::string mib(uint64_t bytes) {
    return bytes % MiB == 0 ? std::to_string(bytes / MiB) + "M" : std::to_string(bytes) + "B";
  }
  std::optional<uint64_t> capacity_;
  uint64_t next_ = 0;
};

constexpr uint64_t kTotal = uint64_t{80} << 30;
constexpr uint64_t kBase = LoggingMemory::kBase;

TEST(ReplayRulesTest, SmallPoolPacksTwoMiBSegmentsAndSplitsDownTo512B) {
  LoggingMemory memory;
  CachingAllocatorReplay replay({}, memory, kTotal);
  auto a = replay.malloc(1, 1000, 0);
  auto b = replay.malloc(2, 1000, 0);
  EXPECT_EQ(memory.log, (std::vector<std::string>{"malloc 2M at 0M"}));
  EXPECT_EQ(a.address, kBase);
  EXPECT_EQ(a.size, 1024u);
  EXPECT_EQ(b.address, kBase + 1024);
  EXPECT_EQ(replay.stats().allocated, 2048u);
  EXPECT_EQ(replay.stats().inactive_split, 2 * MiB - 2048);
  // Another stream never shares the cached block: a segment of its own.
  auto c = replay.malloc(3, 1000, 7);
  EXPECT_EQ(c.address, kBase + 2 * MiB);
}

TEST(ReplayRulesTest, LargePoolSplitsOnlyRemaindersAboveOneMiB) {
  LoggingMemory memory;
  CachingAllocatorReplay replay({}, memory, kTotal);
  auto a = replay.malloc(1, 3 * MiB, 0);   // 20 MiB segment, 17 MiB remainder kept free
  auto b = replay.malloc(2, 16 * MiB, 0);  // fits the 17 MiB: remainder 1 MiB is not > 1 MiB, no split
  EXPECT_EQ(a.address, kBase);
  EXPECT_EQ(b.address, kBase + 3 * MiB);
  EXPECT_EQ(b.size, 17 * MiB);
  EXPECT_EQ(replay.stats().allocated, 20 * MiB);
  ASSERT_TRUE(replay.free_completed(1));
  ASSERT_TRUE(replay.free_completed(2));  // merges back into one whole segment
  EXPECT_EQ(replay.stats().inactive_split, 0u);
  replay.empty_cache();
  EXPECT_EQ(memory.log, (std::vector<std::string>{"malloc 20M at 0M", "free 0M 20M"}));
  EXPECT_EQ(replay.stats().reserved, 0u);
}

TEST(ReplayRulesTest, BestFitTakesTheSmallestBlockThenTheLowestAddress) {
  LoggingMemory memory;
  CachingAllocatorReplay replay({}, memory, kTotal);
  for (uint64_t key : {1, 2, 3}) replay.malloc(key, (key == 2 ? 12 : 14) * MiB, 0);  // 14, 12, 14 MiB segments
  replay.free_completed(1);
  replay.free_completed(2);
  replay.free_completed(3);
  EXPECT_EQ(replay.malloc(4, 11 * MiB, 0).address, kBase + 14 * MiB);  // the 12 MiB one
  EXPECT_EQ(replay.malloc(5, 13 * MiB, 0).address, kBase);             // of the two 14 MiB, the lower address
}

TEST(ReplayRulesTest, MaxSplitSizeKeepsOversizeBlocksWholeAndLimitsTheirRounding) {
  LoggingMemory memory;
  CachingAllocatorReplay replay(conf("max_split_size_mb:20"), memory, kTotal);
  replay.malloc(1, 50 * MiB, 0);
  replay.malloc(2, 40 * MiB, 0);
  replay.free_completed(1);
  replay.free_completed(2);
  // A small request never gets an oversize block: a segment of its own.
  EXPECT_EQ(replay.malloc(3, 3 * MiB, 0).address, kBase + 90 * MiB);
  // >= max_split: a cached block is taken whole when it is less than max_non_split_rounding (20 MiB) larger.
  auto whole = replay.malloc(4, 30 * MiB, 0);
  EXPECT_EQ(whole.address, kBase + 50 * MiB);
  EXPECT_EQ(whole.size, 40 * MiB);
  // The 50 MiB block is 20 MiB larger than a 30 MiB request: refused, so release_available_cached_blocks frees
  // it when cudaMalloc fails, and the retry succeeds.
  LoggingMemory tight(100 * MiB);
  CachingAllocatorReplay limited(conf("max_split_size_mb:20"), tight, kTotal);
  limited.malloc(1, 50 * MiB, 0);
  limited.malloc(2, 30 * MiB, 0);
  limited.free_completed(1);
  auto retried = limited.malloc(3, 30 * MiB, 0);
  EXPECT_TRUE(retried.ok);
  EXPECT_EQ(tight.log, (std::vector<std::string>{"malloc 50M at 0M", "malloc 30M at 50M", "malloc 30M failed",
                                                 "free 0M 50M", "malloc 30M at 80M"}));
  EXPECT_EQ(limited.stats().alloc_retries, 0u);  // the first retry is not counted: only release_cached_blocks'
}

TEST(ReplayRulesTest, TheOomChainFreesCachedSegmentsThenFails) {
  LoggingMemory memory(40 * MiB);
  CachingAllocatorReplay replay({}, memory, kTotal);
  replay.malloc(1, 12 * MiB, 0);
  replay.malloc(2, 1000, 0);
  replay.free_completed(1);
  replay.free_completed(2);
  auto big = replay.malloc(3, 30 * MiB, 0);
  EXPECT_TRUE(big.ok);
  EXPECT_EQ(memory.log, (std::vector<std::string>{"malloc 12M at 0M", "malloc 2M at 12M", "malloc 30M failed",
                                                  "free 0M 12M", "free 12M 2M", "malloc 30M at 14M"}));
  EXPECT_EQ(replay.stats().alloc_retries, 1u);
  auto too_big = replay.malloc(4, 20 * MiB, 0);
  EXPECT_FALSE(too_big.ok);
  EXPECT_EQ(too_big.rounded, 20 * MiB);
  EXPECT_EQ(replay.stats().ooms, 1u);
}

TEST(ReplayRulesTest, AFreeWaitingForOtherStreamsReturnsOnlyWhenCompleted) {
  LoggingMemory memory;
  CachingAllocatorReplay replay({}, memory, kTotal);
  replay.malloc(1, 12 * MiB, 0);
  ASSERT_TRUE(replay.free_requested(1));
  EXPECT_EQ(replay.stats().allocated, 0u);
  EXPECT_EQ(replay.malloc(2, 12 * MiB, 0).address, kBase + 12 * MiB);  // not reusable yet
  ASSERT_TRUE(replay.free_completed(1));
  EXPECT_EQ(replay.malloc(3, 12 * MiB, 0).address, kBase);
}

TEST(ReplayRulesTest, FractionFailsBeforeCudaAndGarbageCollectionNeedsIt) {
  LoggingMemory memory;
  CachingAllocatorReplay replay(conf("garbage_collection_threshold:0.5"), memory, 100 * MiB);
  replay.malloc(1, 30 * MiB, 0);
  replay.free_completed(1);
  replay.malloc(2, 40 * MiB, 0);  // no fraction: gc does nothing, the cached 30 MiB stays
  EXPECT_EQ(replay.stats().reserved, 70 * MiB);
  EXPECT_EQ(replay.stats().gc_releases, 0u);

  LoggingMemory fenced;
  CachingAllocatorReplay gc(conf("garbage_collection_threshold:0.5"), fenced, 100 * MiB);
  gc.set_memory_fraction(0.8);  // 80 MiB allowed, gc above 40 MiB
  gc.malloc(1, 30 * MiB, 0);
  gc.malloc(2, 20 * MiB, 0);
  gc.free_completed(1);
  gc.free_completed(2);
  gc.malloc(3, 40 * MiB, 0);  // 50 MiB reserved > 40: the cached blocks are collected before cudaMalloc
  EXPECT_EQ(gc.stats().gc_releases, 2u);
  EXPECT_EQ(gc.stats().reserved, 40 * MiB);
  EXPECT_FALSE(gc.malloc(4, 42 * MiB, 0).ok);  // 40 + 42 > 80: refused without a cudaMalloc
  EXPECT_EQ(fenced.log.back(), "malloc 40M at 50M");
  // setMemoryFraction (b944315b93d3): a fraction of 1 or more lifts the limit (allowed_memory_maximum = nullopt), and
  // garbage collection with it.
  gc.set_memory_fraction(1.0);
  EXPECT_TRUE(gc.malloc(5, 42 * MiB, 0).ok);
  EXPECT_EQ(gc.stats().reserved, 82 * MiB);
  EXPECT_EQ(gc.stats().gc_releases, 2u);
}

TEST(ReplayRulesTest, ExpandableSegmentsMapPagesAndGrowInPlace) {
  LoggingMemory memory;
  CachingAllocatorReplay replay(conf("expandable_segments:True"), memory, kTotal);
  auto a = replay.malloc(1, 3 * MiB, 0);   // one 20 MiB page of the large pool's segment
  auto b = replay.malloc(2, 30 * MiB, 0);  // the free 17 MiB grows into 2 more pages: tiles right after a
  auto c = replay.malloc(3, 1000, 0);      // the small pool: its own segment of 2 MiB pages
  EXPECT_EQ(a.address, kBase);
  EXPECT_EQ(b.address, kBase + 3 * MiB);
  const uint64_t reservation = (kTotal + kTotal / 8 + 20 * MiB - 1) / (20 * MiB) * (20 * MiB);
  EXPECT_EQ(c.address, kBase + reservation);
  EXPECT_EQ(memory.log, (std::vector<std::string>{"map 0M 20M", "map 20M 20M",
                                                  "map " + std::to_string(reservation / MiB) + "M 2M"}));
  EXPECT_EQ(replay.stats().reserved, 42 * MiB);
  EXPECT_EQ(replay.stats().inactive_split, 0u);  // never counted inside expandable segments
  // Freed pages stay mapped until the cache is emptied; then whole free pages are unmapped.
  replay.free_completed(2);
  EXPECT_EQ(replay.stats().reserved, 42 * MiB);
  replay.empty_cache();
  EXPECT_EQ(memory.log.back(), "unmap 20M 20M");
  EXPECT_EQ(replay.stats().reserved, 22 * MiB);
}

}  // namespace
}  // namespace gmt::replay
