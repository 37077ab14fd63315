// One failed request, one failure (analysis/model/failed_requests.h): PyTorch's failed request is the finding, at the
// level the program asked at, and the cudaMalloc attempts it made (same thread, inside its window, the retry after
// releasing its cache included) are its evidence; a CUDA-level failure of another thread, of the same thread outside
// the window, or made from another Python line stays a failure of its own.
#include <gtest/gtest.h>

#include "analysis/model/analyze.h"
#include "analysis/model/findings.h"
#include "analysis/model/report.h"
#include "analysis/render/render.h"
#include "trace_builder.h"

namespace gmt::analysis {
namespace {

using schema::Api;
using schema::EventKind;
using schema::MemoryKind;
using schema::Source;
using test_support::EventRow;
using test_support::TraceBuilder;

constexpr int64_t kMiB = 1 << 20;
constexpr int64_t kSegmentA = 0x7f0000000000;
constexpr int64_t kSegmentB = 0x7f0010000000;
constexpr int64_t kSegmentC = 0x7f0020000000;  // cached, unsplit: released within the request
constexpr int64_t kRequester = 1000;
constexpr int64_t kOtherThread = 2000;
constexpr int64_t kCupyThread = 3000;

int64_t code(auto value) { return static_cast<int64_t>(value); }

// Stacks: 1 = the tensor's request (train.py:42 in run_step, under <module> at 90); 2 = a cudaMalloc made inside
// that same Python call (a native frame, then the same Python frames); 3 = a cudaMalloc from another line
// (other.py:7).
void stacks(TraceBuilder& builder) {
  builder.exec("INSERT INTO strings(id, text) VALUES (100, '/src/train.py'), (101, 'run_step'), (102, '<module>'), "
               "(103, '/src/other.py'), (104, 'make_buffer')");
  builder.exec("INSERT INTO python_frames(id, file_id, function_id, line) VALUES (2, 100, 101, 42), "
               "(3, 100, 102, 90), (4, 103, 104, 7)");
  builder.exec("INSERT INTO stacks(id, depth) VALUES (1, 2), (2, 3), (3, 3)");
  builder.exec("INSERT INTO stack_frames(stack_id, level, pc, python_frame_id) VALUES (1, 0, 0, 2), (1, 1, 0, 3), "
               "(2, 0, 4198400, 0), (2, 1, 0, 2), (2, 2, 0, 3), (3, 0, 4198400, 0), (3, 1, 0, 4), "
               "(3, 2, 0, 3)");
}

int64_t torch_event(TraceBuilder& builder, int64_t time_ns, EventKind kind, Api api, int64_t address, int64_t size,
                    int64_t thread_id = kRequester, int64_t stack_id = 0, int64_t error = 0) {
  EventRow row;
  row.time_ns = time_ns;
  row.kind = kind;
  row.api = code(api);
  row.memory_kind = code(MemoryKind::TensorBlock);
  row.address = address;
  row.size = size;
  row.stack_id = stack_id;
  row.error = error;
  row.thread_id = thread_id;
  row.source = code(Source::TorchAllocator);
  return builder.event(row);
}

int64_t cuda_failure(TraceBuilder& builder, int64_t time_ns, int64_t size, int64_t thread_id, int64_t stack_id,
                     int64_t device_free) {
  const int64_t id = builder.alloc_failed(time_ns, size, 2, stack_id, device_free, 80 * 1024 * kMiB);
  builder.exec("UPDATE events SET thread_id = " + std::to_string(thread_id) + " WHERE id = " + std::to_string(id));
  return id;
}

struct Ids {
  int64_t first_attempt = 0;
  int64_t retry = 0;
  int64_t request = 0;
};

// PyTorch holds two 20 MiB segments with a 12 MiB block each (8 MiB free in each) and a third, unsplit and cached.
// A 10 MiB request fits no hole: cudaMalloc of a 20 MiB segment fails, the allocator releases the cached segment and
// tries again, which fails too, and the request fails (heap fragmentation: 16 MiB free, largest 8 MiB).
Ids failed_request_trace(TraceBuilder& builder) {
  builder.meta(schema::meta::kTensorBlocks, "1");
  builder.meta(schema::meta::kEventsTimeOrdered, "1");
  stacks(builder);
  builder.begin();
  Ids ids;
  int64_t t = 100;
  for (int64_t segment : {kSegmentA, kSegmentB, kSegmentC}) {
    builder.alloc(t, segment, 20 * kMiB, 2);
    torch_event(builder, t + 10, EventKind::SegmentAlloc, Api::torchSegmentAlloc, segment, 20 * kMiB);
    t += 100;
  }
  torch_event(builder, 400, EventKind::Alloc, Api::torchBlockAlloc, kSegmentA, 12 * kMiB, kRequester, 1);
  torch_event(builder, 410, EventKind::Alloc, Api::torchBlockAlloc, kSegmentB, 12 * kMiB, kRequester, 1);
  cuda_failure(builder, 450, 2 * kMiB, kOtherThread, 0, 15 * kMiB);  // another thread: a failure of its own
  ids.first_attempt = cuda_failure(builder, 500, 20 * kMiB, kRequester, 2, 15 * kMiB);
  torch_event(builder, 510, EventKind::SegmentFree, Api::torchSegmentFree, kSegmentC, 20 * kMiB);
  builder.free(520, kSegmentC);
  ids.retry = cuda_failure(builder, 600, 20 * kMiB, kRequester, 2, 15 * kMiB);
  ids.request = torch_event(builder, 700, EventKind::AllocFailed, Api::torchBlockAlloc, 0, 10 * kMiB, kRequester, 1, 2);
  // A thread that cudaMallocs from another Python line, then asks PyTorch: not that request's attempt.
  cuda_failure(builder, 800, 3 * kMiB, kCupyThread, 3, 15 * kMiB);
  torch_event(builder, 900, EventKind::AllocFailed, Api::torchBlockAlloc, 0, 10 * kMiB, kCupyThread, 1, 2);
  // After the request failed, with no request after it: the thread's own failure.
  cuda_failure(builder, 1000, 4 * kMiB, kRequester, 2, 15 * kMiB);
  torch_event(builder, 2000, EventKind::Free, Api::torchBlockFree, kSegmentA, 0);
  torch_event(builder, 2010, EventKind::Free, Api::torchBlockFree, kSegmentB, 0);
  builder.commit();
  return ids;
}

TEST(FailedRequestsTest, TheCudaAttemptsInsideAFailedRequestAreItsEvidence) {
  TraceBuilder builder;
  const Ids ids = failed_request_trace(builder);
  TraceFile trace = builder.open();
  Report report = analyze_trace(trace);
  EXPECT_EQ(report.totals.failed_allocations, 5u);
  EXPECT_EQ(report.totals.failed_attempts_in_requests, 2u);
  ASSERT_EQ(report.failures.size(), 5u);
  std::vector<int64_t> sizes;
  for (const AllocFailure& failure : report.failures) sizes.push_back(static_cast<int64_t>(failure.requested_bytes));
  EXPECT_EQ(sizes, (std::vector<int64_t>{2 * kMiB, 10 * kMiB, 3 * kMiB, 10 * kMiB, 4 * kMiB}));

  const AllocFailure& request = report.failures[1];
  EXPECT_EQ(request.event_id, ids.request);
  EXPECT_EQ(request.label, "heap fragmentation");
  ASSERT_TRUE(request.heap);
  EXPECT_EQ(request.heap->free_bytes, uint64_t(16 * kMiB));
  EXPECT_EQ(request.heap->largest_free_bytes, uint64_t(8 * kMiB));
  ASSERT_EQ(request.attempts.size(), 2u);
  EXPECT_EQ(request.attempts[0].event_id, ids.first_attempt);
  EXPECT_EQ(request.attempts[1].event_id, ids.retry);
  EXPECT_EQ(request.attempts[0].label, "out of memory");
  EXPECT_EQ(request.attempts[1].api, Api::cudaMalloc);
  EXPECT_EQ(request.segments_released, 1u);
  EXPECT_EQ(request.segment_bytes_released, uint64_t(20 * kMiB));

  // The other thread's request: the cudaMalloc from other.py was not made inside it.
  EXPECT_TRUE(report.failures[3].attempts.empty());
  EXPECT_FALSE(report.failures[2].heap_source);
  EXPECT_FALSE(report.failures[4].heap_source);
}

TEST(FailedRequestsTest, TheFindingsLeadWithTheRequestAndItsEvidence) {
  TraceBuilder builder;
  failed_request_trace(builder);
  TraceFile trace = builder.open();
  const Report report = analyze_trace(trace);
  const std::vector<Finding> findings = findings_of(report);
  ASSERT_EQ(findings.size(), 5u);
  EXPECT_EQ(findings[0].verdict,
            "failed allocation of 10.00 MiB on device 0: fragmentation inside PyTorch's caching allocator's cache "
            "(16.00 MiB free in it, largest free block 8.00 MiB)");
  EXPECT_EQ(findings[0].detail,
            "inside it 2 CUDA-level cudaMalloc attempts failed (out of memory); PyTorch's caching allocator released "
            "1 cached segment (20.00 MiB) to retry");
  EXPECT_EQ(findings[0].user_frame, "run_step /src/train.py:42");
  for (const Finding& finding : findings) EXPECT_NE(finding.bytes, uint64_t(20 * kMiB)) << finding.verdict;

  const std::string text = render_text(report);
  EXPECT_NE(text.find("    inside this request, at the CUDA level (its evidence, not failures of their own):\n"
                      "      cudaMalloc of 20.00 MiB (20971520 B) failed at "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("      PyTorch's caching allocator released 1 cached segment (20.00 MiB (20971520 B)) within "
                      "the request to retry\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\nFailed allocations (5)\n"), std::string::npos) << text;
  const std::string json = render_json(report);
  EXPECT_NE(json.find("\"failed_attempts_in_requests\": 2"), std::string::npos);
  EXPECT_NE(json.find("\"segment_bytes_released\": 20971520"), std::string::npos);
}

// A request whose thread made no CUDA-level attempt (PyTorch refused it under its memory fraction) has none; a CUDA
// failure before the thread's previous request ended belongs to no later request.
TEST(FailedRequestsTest, AFailureBeforeThePreviousRequestEndedIsNoAttempt) {
  TraceBuilder builder;
  builder.meta(schema::meta::kTensorBlocks, "1");
  stacks(builder);
  builder.begin();
  builder.alloc(100, kSegmentA, 20 * kMiB, 2);
  torch_event(builder, 110, EventKind::SegmentAlloc, Api::torchSegmentAlloc, kSegmentA, 20 * kMiB);
  cuda_failure(builder, 200, 64 * kMiB, kRequester, 2, 15 * kMiB);
  torch_event(builder, 300, EventKind::Alloc, Api::torchBlockAlloc, kSegmentA, 12 * kMiB, kRequester, 1);
  torch_event(builder, 400, EventKind::AllocFailed, Api::torchBlockAlloc, 0, 30 * kMiB, kRequester, 1, 2);
  builder.commit();
  TraceFile trace = builder.open();
  const Report report = analyze_trace(trace);
  ASSERT_EQ(report.failures.size(), 2u);
  EXPECT_FALSE(report.failures[0].heap_source);
  EXPECT_TRUE(report.failures[1].attempts.empty());
  EXPECT_EQ(report.failures[1].label, "heap out of memory");
  EXPECT_EQ(report.totals.failed_attempts_in_requests, 0u);
}

}  // namespace
}  // namespace gmt::analysis
