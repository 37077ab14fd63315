// The recorder alone (its objects linked in, no hooks, no CUDA), on what per-thread buffers must keep
// (recorder/event_buffers.h): the trace's order when memory moves between threads, a thread stalled between its
// clock read and its event, and threads that come and go. Like recorder_stress, it matters most under
// ThreadSanitizer (scripts/sanitize.sh).
// Usage:
//   recorder_order handoff TRACE [threads=4] [operations=100000]   addresses freed and reused across threads
//   recorder_order stall TRACE                                     an event published 500 ms after its clock read
//   recorder_order churn TRACE [threads=200]                       short-lived threads: buffers drained, given back
//   recorder_order claims TRACE                                    each device described by the first event on it
// Exit 0 when every check holds; otherwise prints what differs and exits 1.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "recorder/recorder.h"
#include "recorder/recorder_state.h"
#include "recorder_test_support.h"

namespace {

using gmt::schema::EventKind;
using gmt_test::expect_eq;
using gmt_test::g_failures;
using gmt_test::query_int;
using gmt_test::record_one;
using gmt_test::use_trace;

// Rows whose time is before the time of the row recorded before them (events.id order).
constexpr const char* kTimesGoingBack =
    "SELECT count(*) FROM (SELECT time_ns, lag(time_ns) OVER (ORDER BY id) AS previous FROM events) "
    "WHERE time_ns < previous";

// Addresses move between threads as a device allocator's do: a thread takes one from a shared pool and records
// the allocation after it got it; any thread may free it, recording the free before it gives the address back,
// and the next allocation of it may come from another thread at once. In the trace (id order) every address
// must then go allocation, free, allocation, ...: the merge of the threads' buffers must not swap a free and the
// reallocation that it made possible.
int run_handoff(const std::string& path, int threads, int operations) {
  use_trace(path);
  constexpr int kAddresses = 32;  // few: each is reused thousands of times, by every thread
  std::mutex pool_mutex, live_mutex;
  std::vector<uint64_t> pool;
  std::deque<uint64_t> live;
  for (int k = 0; k < kAddresses; ++k) pool.push_back(0x700000000ull + static_cast<uint64_t>(k) * 4096);
  std::atomic<int64_t> allocations{0}, frees{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < operations; ++i) {
        uint64_t address = 0;
        if ((i + t) % 2 == 0) {
          {
            std::lock_guard lock(pool_mutex);
            if (pool.empty()) continue;
            address = pool.back();
            pool.pop_back();
          }
          record_one(EventKind::Alloc, address, 256, /*take_stack=*/false);  // after the grant
          allocations.fetch_add(1, std::memory_order_relaxed);
          std::lock_guard lock(live_mutex);
          live.push_back(address);
        } else {
          {
            std::lock_guard lock(live_mutex);
            if (live.empty()) continue;
            address = live.front();  // the oldest: most often another thread's
            live.pop_front();
          }
          record_one(EventKind::Free, address, 0, /*take_stack=*/false);  // before the release
          frees.fetch_add(1, std::memory_order_relaxed);
          std::lock_guard lock(pool_mutex);
          pool.push_back(address);
        }
      }
    });
  }
  for (std::thread& w : workers) w.join();
  gmt::recorder::finish(/*close=*/true);

  expect_eq("allocations", query_int(path, "SELECT count(*) FROM events WHERE kind = 1"), allocations.load());
  expect_eq("frees", query_int(path, "SELECT count(*) FROM events WHERE kind = 2"), frees.load());
  expect_eq("an address allocated or freed twice in a row (the order swapped across threads)",
            query_int(path, "SELECT count(*) FROM (SELECT kind, lag(kind) OVER (PARTITION BY address ORDER BY id) "
                            "AS previous FROM events) WHERE kind = previous"),
            0);
  expect_eq("addresses whose first event is not their allocation",
            query_int(path, "SELECT count(*) FROM (SELECT kind, row_number() OVER (PARTITION BY address ORDER BY id) "
                            "AS n FROM events) WHERE n = 1 AND kind != 1"),
            0);
  expect_eq("addresses live at the end",
            query_int(path, "SELECT count(*) FROM (SELECT kind, row_number() OVER (PARTITION BY address ORDER BY id "
                            "DESC) AS n FROM events) WHERE n = 1 AND kind = 1"),
            static_cast<int64_t>(live.size()));
  expect_eq("times going back", query_int(path, kTimesGoingBack), 0);
  expect_eq("threads seen", query_int(path, "SELECT count(DISTINCT thread_id) FROM events"), threads);
  std::printf("handoff: threads=%d allocations=%lld frees=%lld failures=%d\n", threads,
              static_cast<long long>(allocations.load()), static_cast<long long>(frees.load()), g_failures);
  return g_failures == 0 ? 0 : 1;
}

// A thread reads the clock for an event and is held up for 500 ms before recording it (as a preempted thread
// can be), while another thread records all along. The late event must be in the trace, once, after everything
// written before it was published, with the time of the last of those: times never go backwards.
int run_stall(const std::string& path) {
  use_trace(path);
  constexpr uint64_t kStalledAddress = 0xdead0000;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> others{0};
  std::thread other([&] {
    for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      record_one(EventKind::Alloc, 0x100000000ull + i * 512, 512, /*take_stack=*/false);
      others.fetch_add(1, std::memory_order_relaxed);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const uint64_t stamped = gmt::recorder::now_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the writer writes the other thread's meanwhile
  record_one(EventKind::Alloc, kStalledAddress, 4096, /*take_stack=*/false, stamped);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  stop = true;
  other.join();
  gmt::recorder::finish(/*close=*/true);

  expect_eq("events", query_int(path, "SELECT count(*) FROM events"), others.load() + 1);
  expect_eq("the stalled event", query_int(path, "SELECT count(*) FROM events WHERE address = 3735879680"), 1);
  expect_eq("times going back", query_int(path, kTimesGoingBack), 0);
  const int64_t stored = query_int(path, "SELECT time_ns FROM events WHERE address = 3735879680");
  const std::string later_stamped_before =
      "SELECT count(*) FROM events WHERE id < (SELECT id FROM events WHERE address = 3735879680) AND time_ns > " +
      std::to_string(stamped);
  const int64_t written_before = query_int(path, later_stamped_before.c_str());
  // At least 100 ms of the other thread's events (one every ~20-80 us), stamped after the stalled one, went in
  // before it: it was not held back in the merge, nor were they.
  if (stored < static_cast<int64_t>(stamped) + 100'000'000) {
    expect_eq("the stalled event's time, ms after its clock read (at least 100)",
              (stored - static_cast<int64_t>(stamped)) / 1'000'000, 100);
  }
  if (written_before < 100) expect_eq("events stamped after it, written before it (at least 100)", written_before, 100);
  std::printf("stall: others=%lld, the stalled event written %.1f ms after its clock read, after %lld later-stamped "
              "events; failures=%d\n",
              static_cast<long long>(others.load()), static_cast<double>(stored - static_cast<int64_t>(stamped)) / 1e6,
              static_cast<long long>(written_before), g_failures);
  return g_failures == 0 ? 0 : 1;
}

// Threads that record a little and exit, a few at a time: every event in the trace, and once the writer has
// taken their events, no buffer left in use (each goes back to be reused by a later thread).
int run_churn(const std::string& path, int threads) {
  use_trace(path);
  constexpr int kAtOnce = 4, kPairs = 50;
  for (int started = 0; started < threads; started += kAtOnce) {
    std::vector<std::thread> wave;
    for (int t = started; t < std::min(threads, started + kAtOnce); ++t) {
      wave.emplace_back([t] {
        for (int i = 0; i < kPairs; ++i) {
          uint64_t address = (static_cast<uint64_t>(t + 1) << 32) + static_cast<uint64_t>(i) * 512;
          record_one(EventKind::Alloc, address, 512, /*take_stack=*/false);
          if (i != 0) record_one(EventKind::Free, address, 0, /*take_stack=*/false);
        }
      });
    }
    for (std::thread& w : wave) w.join();
  }
  const size_t in_use_before_drain = gmt::recorder::thread_buffers_in_use();
  // A flush (as a fatal-signal handler asks for one) makes the writer take everything up to now.
  expect_eq("flush", gmt::recorder::flush_from_signal_handler(5000) ? 1 : 0, 1);
  expect_eq("buffers in use once drained", static_cast<int64_t>(gmt::recorder::thread_buffers_in_use()), 0);
  gmt::recorder::finish(/*close=*/true);
  expect_eq("allocations", query_int(path, "SELECT count(*) FROM events WHERE kind = 1"), int64_t{threads} * kPairs);
  expect_eq("frees", query_int(path, "SELECT count(*) FROM events WHERE kind = 2"), int64_t{threads} * (kPairs - 1));
  expect_eq("live at the end",
            query_int(path, "SELECT count(*) FROM events a WHERE kind = 1 AND NOT EXISTS "
                            "(SELECT 1 FROM events f WHERE f.kind = 2 AND f.address = a.address)"),
            threads);
  expect_eq("times going back", query_int(path, kTimesGoingBack), 0);
  std::printf("churn: threads=%d, buffers in use before the drain %zu; failures=%d\n", threads, in_use_before_drain,
              g_failures);
  return g_failures == 0 ? 0 : 1;
}

// Every device's first event claims its description (record(), recorder/recorder_state.h: devices_claimed), in
// whichever thread makes it, also when that thread has claimed another device before: each thread keeps the
// devices it has seen claimed in its own buffer, and must not take one device's claim for another's.
int run_claims(const std::string& path) {
  use_trace(path);
  auto record_on = [](int16_t device, uint64_t address) {
    record_one(EventKind::Alloc, address, 256, /*take_stack=*/false, /*time_ns=*/0, device);
  };
  auto claimed = [] { return static_cast<int64_t>(gmt::recorder::detail::g_recorder->devices_claimed.load()); };
  record_on(0, 0x1000);
  expect_eq("claimed after device 0", claimed(), 0b1);
  record_on(1, 0x2000);  // the same thread, another device
  expect_eq("claimed after device 1", claimed(), 0b11);
  record_on(0, 0x3000);
  std::thread([&] {
    record_on(1, 0x4000);  // claimed by the first thread already
    record_on(5, 0x5000);  // this thread's second device, new to the process
  }).join();
  expect_eq("claimed after another thread's devices 1 and 5", claimed(), 0b100011);
  gmt::recorder::finish(/*close=*/true);
  expect_eq("allocations", query_int(path, "SELECT count(*) FROM events WHERE kind = 1"), 5);
  expect_eq("devices in the trace", query_int(path, "SELECT count(DISTINCT device) FROM events"), 3);
  std::printf("claims: devices_claimed=%#llx; failures=%d\n", static_cast<unsigned long long>(claimed()), g_failures);
  return g_failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "handoff") == 0) {
    return run_handoff(argv[2], argc > 3 ? std::atoi(argv[3]) : 4, argc > 4 ? std::atoi(argv[4]) : 100000);
  }
  if (argc >= 3 && std::strcmp(argv[1], "stall") == 0) return run_stall(argv[2]);
  if (argc >= 3 && std::strcmp(argv[1], "churn") == 0) return run_churn(argv[2], argc > 3 ? std::atoi(argv[3]) : 200);
  if (argc >= 3 && std::strcmp(argv[1], "claims") == 0) return run_claims(argv[2]);
  std::fprintf(stderr, "usage: recorder_order handoff|stall|churn|claims TRACE [threads] [operations]\n");
  return 2;
}
