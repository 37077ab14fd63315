#include "recorder/allocator_samples.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <ctime>

#include "recorder/event.h"
#include "recorder/guard.h"
#include "recorder/recorder.h"

namespace gmt::recorder {
namespace {

std::atomic<uint64_t> g_range_ends{0};
// The futex word: bumped after g_range_ends, so a waiter that read an old word before checking the count
// is woken (or its FUTEX_WAIT fails at once because the word moved).
std::atomic<uint32_t> g_range_end_word{0};
std::atomic<int> g_waiters{0};

long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

}  // namespace

void note_top_level_range_end() {
  g_range_ends.fetch_add(1, std::memory_order_relaxed);
  g_range_end_word.fetch_add(1, std::memory_order_seq_cst);
  if (g_waiters.load(std::memory_order_seq_cst) > 0) futex(&g_range_end_word, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr);
}

}  // namespace gmt::recorder

using namespace gmt::recorder;

extern "C" __attribute__((visibility("default"))) int gmt_record_allocator_sample(
    int device, int allocator, int trigger, uint64_t in_use, uint64_t reserved, int64_t inactive_split, int64_t retries,
    int64_t ooms, int64_t request) {
  if (device < 0 || device > INT16_MAX || allocator < 1 || allocator > gmt::schema::kMaxFrameworkAllocator ||
      trigger < 1 || trigger > gmt::schema::kMaxSampleTrigger) {
    return -1;
  }
  HookScope scope;
  if (!scope.active()) return 1;
  EventRecord e;
  e.time_ns = now_ns();
  e.thread_id = current_thread_id();
  e.kind = gmt::schema::EventKind::AllocatorSample;
  e.device = static_cast<int16_t>(device);
  e.allocator_sample = AllocatorSamplePayload{.in_use_bytes = in_use,
                                              .reserved_bytes = reserved,
                                              .inactive_split_bytes = inactive_split,  // negative: no such figure
                                              .alloc_retries = retries,
                                              .ooms = ooms,
                                              .request_bytes = request,
                                              .allocator = static_cast<gmt::schema::FrameworkAllocator>(allocator),
                                              .trigger = static_cast<gmt::schema::SampleTrigger>(trigger)};
  record(e, /*take_stack=*/false);
  return 0;
}

extern "C" __attribute__((visibility("default"))) uint64_t gmt_top_level_range_ends(void) {
  return g_range_ends.load(std::memory_order_relaxed);
}

extern "C" __attribute__((visibility("default"))) uint64_t gmt_wait_top_level_range_end(uint64_t seen, int timeout_ms) {
  g_waiters.fetch_add(1, std::memory_order_seq_cst);
  uint32_t word = g_range_end_word.load(std::memory_order_seq_cst);
  if (g_range_ends.load(std::memory_order_seq_cst) == seen && timeout_ms > 0) {
    timespec timeout{timeout_ms / 1000, static_cast<long>(timeout_ms % 1000) * 1'000'000};
    futex(&g_range_end_word, FUTEX_WAIT_PRIVATE, word, &timeout);  // EINTR, EAGAIN, ETIMEDOUT: all just return
  }
  g_waiters.fetch_sub(1, std::memory_order_seq_cst);
  return g_range_ends.load(std::memory_order_relaxed);
}
