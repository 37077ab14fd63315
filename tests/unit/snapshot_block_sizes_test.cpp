// `report --format memory-viz`'s PyTorch blocks at their real sizes (analysis/replay/block_sizes.h): hand-built
// schema-10 traces whose block sizes follow from CUDACachingAllocator.cpp's rules (each step's comment says why), the
// snapshot's blocks and segment figures to the byte, and each case where the export keeps the requested sizes and
// says why.
#include <gtest/gtest.h>

#include "analysis/model/snapshot.h"
#include "trace_builder.h"

namespace gmt::analysis {
namespace {

using schema::Api;
using schema::EventKind;
using test_support::TraceBuilder;

constexpr int64_t MiB = 1048576;
constexpr int64_t S1 = 0x7f0000000000;  // a large-pool segment
constexpr int64_t S3 = 0x7f0004000000;  // a small-pool segment

void torch_event(TraceBuilder& trace, int64_t time, EventKind kind, Api api, int64_t address, int64_t size) {
  test_support::EventRow row;
  row.time_ns = time;
  row.kind = kind;
  row.api = static_cast<int64_t>(api);
  row.memory_kind = static_cast<int64_t>(schema::MemoryKind::TensorBlock);
  row.address = address;
  row.size = size;
  row.source = static_cast<int64_t>(schema::Source::TorchAllocator);
  trace.event(row);
}

// `second_at`: where the recording put the second large block (S1 + 3 MiB is where best fit puts it).
void default_allocator_trace(TraceBuilder& trace, int64_t second_at = S1 + 3 * MiB) {
  trace.meta(schema::meta::kTensorBlocks, "1");
  trace.meta(schema::meta::kEventsTimeOrdered, "1");
  trace.meta(schema::meta::kTorchAllocConf, "");  // v10: the settings, here the defaults
  trace.exec("INSERT INTO devices(ordinal, name, total_bytes) VALUES (0, 'NVIDIA H100', 85899345920)");
  // 3 MiB: large pool, a 20 MiB segment, split (17 MiB left is more than 1 MiB).
  torch_event(trace, 10, EventKind::SegmentAlloc, Api::torchSegmentAlloc, S1, 20 * MiB);
  torch_event(trace, 11, EventKind::Alloc, Api::torchBlockAlloc, S1, 3 * MiB);
  // 16 MiB + 100 B rounds to 16 MiB + 512 B; the free 17 MiB would keep 1 MiB - 512 B, not more than 1 MiB: not
  // split, handed out whole. PyTorch counts 17 MiB.
  torch_event(trace, 12, EventKind::Alloc, Api::torchBlockAlloc, second_at, 16 * MiB + 100);
  // Small pool (1 MiB or less): a 2 MiB segment; 1000 B and 700 B round to 1024 B each, 4000 B to 4096 B.
  torch_event(trace, 13, EventKind::SegmentAlloc, Api::torchSegmentAlloc, S3, 2 * MiB);
  torch_event(trace, 14, EventKind::Alloc, Api::torchBlockAlloc, S3, 1000);
  torch_event(trace, 15, EventKind::Alloc, Api::torchBlockAlloc, S3 + 1024, 700);
  torch_event(trace, 16, EventKind::Alloc, Api::torchBlockAlloc, S3 + 2048, 4000);
  // Let go while another stream may still use it: pending until its free_completed, which never comes.
  torch_event(trace, 17, EventKind::FreeRequested, Api::torchBlockFreeRequested, S3 + 2048, 4000);
}

struct Shown {
  uint64_t offset;
  uint64_t size;
  uint64_t requested;
  const char* state;
  bool operator==(const Shown& o) const {
    return offset == o.offset && size == o.size && requested == o.requested && std::string(state) == o.state;
  }
};
std::ostream& operator<<(std::ostream& out, const Shown& s) {
  return out << "{" << s.offset << ", " << s.size << ", " << s.requested << ", " << s.state << "}";
}

std::vector<Shown> blocks_of(const Snapshot& snapshot, uint64_t address) {
  for (const SnapshotSegment& segment : snapshot.segments) {
    if (segment.address != address) continue;
    std::vector<Shown> shown;
    for (const SnapshotBlock& b : segment.blocks) {
      const char* state = !b.allocated ? "inactive" : b.pending ? "active_pending_free" : "active_allocated";
      shown.push_back({b.address - address, b.size, b.allocated ? b.requested : 0, state});
    }
    return shown;
  }
  ADD_FAILURE() << "no segment at " << address;
  return {};
}

const SnapshotSegment& segment_at(const Snapshot& snapshot, uint64_t address) {
  for (const SnapshotSegment& segment : snapshot.segments) {
    if (segment.address == address) return segment;
  }
  throw std::runtime_error("no segment");
}

TEST(SnapshotBlockSizesTest, BlocksHaveTheSizesPyTorchCountsWhenTheReplayIsExact) {
  TraceBuilder trace;
  default_allocator_trace(trace);
  const Snapshot snapshot = build_snapshot(trace.open(), {});
  EXPECT_TRUE(snapshot.block_sizes_replayed) << snapshot.block_sizes_note;
  EXPECT_EQ(snapshot.block_sizes_note, "");
  EXPECT_EQ(blocks_of(snapshot, S1), (std::vector<Shown>{{0, 3 * MiB, 3 * MiB, "active_allocated"},
                                                         {3 * MiB, 17 * MiB, 16 * MiB + 100, "active_allocated"}}));
  const SnapshotSegment& large = segment_at(snapshot, S1);
  EXPECT_EQ(large.allocated_bytes(), uint64_t(20 * MiB));  // torch.cuda.memory_allocated() counts this
  EXPECT_EQ(large.requested_bytes(), uint64_t(19 * MiB + 100));
  EXPECT_EQ(blocks_of(snapshot, S3), (std::vector<Shown>{{0, 1024, 1000, "active_allocated"},
                                                         {1024, 1024, 700, "active_allocated"},
                                                         {2048, 4096, 4000, "active_pending_free"},
                                                         {6144, 2 * MiB - 6144, 0, "inactive"}}));
  const SnapshotSegment& small = segment_at(snapshot, S3);
  EXPECT_EQ(small.allocated_bytes(), 2048u);  // the pending block is no longer allocated ...
  EXPECT_EQ(small.active_bytes(), 6144u);     // ... but still active
  EXPECT_EQ(small.requested_bytes(), 5700u);
  // The history keeps the requested sizes, as PyTorch's own trace does.
  uint64_t alloc_bytes = 0;
  for (const SnapshotEntry& e : snapshot.devices.at(0).entries)
    alloc_bytes += e.action == SnapshotAction::Alloc ? e.size : 0;
  EXPECT_EQ(alloc_bytes, uint64_t(19 * MiB + 100 + 1000 + 700 + 4000));
}

TEST(SnapshotBlockSizesTest, WithoutAReplayTheRequestedSizesStayAndTheNoteSaysWhy) {
  auto requested_only = [](const Snapshot& snapshot) {
    EXPECT_FALSE(snapshot.block_sizes_replayed);
    EXPECT_EQ(blocks_of(snapshot, S1),
              (std::vector<Shown>{{0, 3 * MiB, 3 * MiB, "active_allocated"},
                                  {3 * MiB, 16 * MiB + 100, 16 * MiB + 100, "active_allocated"},
                                  {19 * MiB + 100, MiB - 100, 0, "inactive"}}));
  };
  {  // A trace of schema 9: no settings, no allocator calls, no free_requested recorded.
    test_support::TraceBuilderOptions v9;
    v9.user_version = 9;
    TraceBuilder trace(v9);
    default_allocator_trace(trace);
    const Snapshot snapshot = build_snapshot(trace.open(), {});
    requested_only(snapshot);
    EXPECT_EQ(snapshot.block_sizes_note, "the trace was recorded with schema 9, before PyTorch's allocator settings "
                                         "and calls were recorded (v10)");
  }
  {  // The replay does not reproduce the recording: the second block is not where best fit puts it.
    TraceBuilder trace;
    default_allocator_trace(trace, S1 + 4 * MiB);
    const Snapshot snapshot = build_snapshot(trace.open(), {});
    EXPECT_FALSE(snapshot.block_sizes_replayed);
    EXPECT_EQ(snapshot.block_sizes_note, "the replay of PyTorch's allocator on device 0 does not reproduce the "
                                         "recording at event 3: the replay places the 16777316 B block at "
                                         "0x7f0000300000; the recording at 0x7f0000400000");
  }
  {  // --until: the blocks of another moment than the end.
    TraceBuilder trace;
    default_allocator_trace(trace);
    EventFilters filters;
    filters.until_ns = 1'000'000;
    const Snapshot snapshot = build_snapshot(trace.open(), filters);
    requested_only(snapshot);
    EXPECT_NE(snapshot.block_sizes_note.find("--until"), std::string::npos) << snapshot.block_sizes_note;
  }
  {  // Events lost while recording.
    TraceBuilder trace;
    default_allocator_trace(trace);
    trace.meta(schema::meta::kDroppedEvents, "2");
    const Snapshot snapshot = build_snapshot(trace.open(), {});
    requested_only(snapshot);
    EXPECT_NE(snapshot.block_sizes_note.find("2 events were lost"), std::string::npos) << snapshot.block_sizes_note;
  }
  {  // Nothing of PyTorch's: nothing to say.
    TraceBuilder trace;
    trace.alloc(10, S1, 1000);
    const Snapshot snapshot = build_snapshot(trace.open(), {});
    EXPECT_FALSE(snapshot.block_sizes_replayed);
    EXPECT_EQ(snapshot.block_sizes_note, "");
    EXPECT_EQ(snapshot.segments.at(0).blocks.at(0).size, 1000u);
  }
}

}  // namespace
}  // namespace gmt::analysis
