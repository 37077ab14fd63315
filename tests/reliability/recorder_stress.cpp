// The recorder alone (recorder/ objects linked in, no hooks, no CUDA): many threads recording at once, and
// the flush that fatal-signal handlers ask for. Built in every build directory; the one that matters most
// is ThreadSanitizer's (scripts/sanitize.sh), which cannot preload the library into the e2e apps.
// Usage:
//   recorder_stress threads TRACE [threads=8] [pairs=20000]   counts and bytes exact after finish()
//   recorder_stress signal-flush TRACE                         a signal handler's flush writes everything
//   recorder_stress fork-flood TRACE                           fork is not starved by a flood of events
//   recorder_stress never-wait TRACE [flooders=3] [slow=30000]  threads that must never wait (as in PyTorch's
//                                                              allocator callback) outrun the writer: what is
//                                                              dropped is counted exactly, nothing is written twice
// Exit 0 when every check holds; otherwise prints what differs and exits 1.
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "recorder/recorder.h"
#include "recorder_test_support.h"

namespace {

using gmt::schema::EventKind;

using gmt_test::expect_eq;
using gmt_test::g_failures;
using gmt_test::query_int;
using gmt_test::record_one;
using gmt_test::use_trace;

int run_threads(const std::string& path, int threads, int pairs) {
  use_trace(path);
  std::atomic<bool> done{false};
  std::atomic<int> flushes{0};
  // Meanwhile, flush requests as a fatal-signal handler makes them (outside a handler here): they must never
  // disturb the counts, and under TSan the hand-off between handler and writer is checked too.
  std::thread flusher([&] {
    while (!done.load()) {
      if (gmt::recorder::flush_from_signal_handler(2000)) flushes.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
  });
  // The workers never exit: a thread that took stacks owns a libunwind trace cache, freed at thread exit by a
  // key destructor that locks a mutex after ThreadSanitizer (GCC 12) has finished the thread, which crashes
  // TSan. They report being done and park; the process exits with them parked (no destructor runs then).
  std::atomic<int> finished{0};
  for (int t = 0; t < threads; ++t) {
    std::thread([t, pairs, &finished] {
      for (int i = 0; i < pairs; ++i) {
        uint64_t address = (static_cast<uint64_t>(t + 1) << 40) + static_cast<uint64_t>(i) * 512;
        record_one(EventKind::Alloc, address, 256 + (i % 7) * 512, /*take_stack=*/i % 8 == 0);
        if (i % 1000 != 999) record_one(EventKind::Free, address, 0, /*take_stack=*/i % 8 == 0);
      }
      finished.fetch_add(1);
      for (;;) pause();
    }).detach();
  }
  while (finished.load() < threads) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  done = true;
  flusher.join();
  gmt::recorder::finish(/*close=*/true);

  int64_t allocs = int64_t{threads} * pairs;
  int64_t kept_per_thread = pairs / 1000;
  int64_t frees = allocs - int64_t{threads} * kept_per_thread;
  int64_t bytes_per_thread = 0, kept_bytes_per_thread = 0;
  for (int i = 0; i < pairs; ++i) {
    bytes_per_thread += 256 + (i % 7) * 512;
    if (i % 1000 == 999) kept_bytes_per_thread += 256 + (i % 7) * 512;
  }
  expect_eq("alloc events", query_int(path, "SELECT count(*) FROM events WHERE kind = 1"), allocs);
  expect_eq("free events", query_int(path, "SELECT count(*) FROM events WHERE kind = 2"), frees);
  expect_eq("allocated bytes", query_int(path, "SELECT sum(size) FROM events WHERE kind = 1"),
            bytes_per_thread * threads);
  expect_eq("distinct allocated addresses",
            query_int(path, "SELECT count(DISTINCT address) FROM events WHERE kind = 1"), allocs);
  expect_eq("live bytes at the end",
            query_int(path, "SELECT (SELECT sum(size) FROM events WHERE kind = 1) - "
                            "(SELECT coalesce(sum(a.size), 0) FROM events a WHERE a.kind = 1 AND a.address IN "
                            "(SELECT address FROM events WHERE kind = 2))"),
            kept_bytes_per_thread * threads);
  expect_eq("threads seen", query_int(path, "SELECT count(DISTINCT thread_id) FROM events"), threads);
  expect_eq(
      "events with a stack that does not exist",
      query_int(path, "SELECT count(*) FROM events WHERE stack_id != 0 AND stack_id NOT IN (SELECT id FROM stacks)"),
      0);
  expect_eq("complete", query_int(path, "SELECT value FROM meta WHERE key = 'complete'"), 1);
  std::printf("threads=%d pairs=%d flushes_served=%d failures=%d\n", threads, pairs, flushes.load(), g_failures);
  return g_failures == 0 ? 0 : 1;
}

std::atomic<int> g_handler_result{-1};

void on_usr2(int) { g_handler_result = gmt::recorder::flush_from_signal_handler(2000) ? 1 : 0; }

int run_signal_flush(const std::string& path) {
  use_trace(path);
  constexpr int kFirst = 1000, kSecond = 500;
  for (int i = 0; i < kFirst; ++i) record_one(EventKind::Alloc, 0x1000 + i * 512, 512, true);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the periodic flush writes the first ones
  for (int i = 0; i < kSecond; ++i) record_one(EventKind::Alloc, 0x100000 + i * 512, 512, true);
  struct sigaction action {};
  action.sa_handler = on_usr2;
  sigaction(SIGUSR2, &action, nullptr);
  auto before = std::chrono::steady_clock::now();
  raise(SIGUSR2);  // runs the handler on this thread before raise returns
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - before);
  expect_eq("handler's flush completed", g_handler_result.load(), 1);
  // Read before finish(): the handler returned true only once the writer had written a batch taken after
  // its request, so the second group is in the trace now, before any exit-time flush.
  expect_eq("events in the trace after the handler's flush", query_int(path, "SELECT count(*) FROM events"),
            kFirst + kSecond);
  expect_eq("complete before exit", query_int(path, "SELECT value FROM meta WHERE key = 'complete'"), 0);
  std::printf("signal flush took %lld ms; failures=%d\n", static_cast<long long>(waited.count()), g_failures);
  gmt::recorder::finish(/*close=*/true);
  return g_failures == 0 ? 0 : 1;
}

// Two threads record as fast as they can (the writer falls behind: back-pressure, batches of up to 256
// chunks) while the main thread forks. The atfork handler needs both recorder locks; std::mutex is not fair,
// and without the fork gate a fork waited 2 s typically and up to 40 s here. Now it waits for one transaction.
int run_fork_flood(const std::string& path) {
  use_trace(path);
  std::atomic<bool> stop{false};
  std::atomic<int> finished{0};
  for (int t = 0; t < 2; ++t) {
    std::thread([t, &stop, &finished] {
      for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        record_one(EventKind::Alloc, (static_cast<uint64_t>(t + 1) << 40) + i * 512, 512, /*take_stack=*/false);
      }
      finished.fetch_add(1);
      for (;;) pause();  // see run_threads
    }).detach();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // let the backlog build up
  std::vector<int64_t> fork_ms;
  for (int k = 0; k < 10; ++k) {
    auto before = std::chrono::steady_clock::now();
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    fork_ms.push_back(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - before).count());
    int status = 0;
    waitpid(pid, &status, 0);
    expect_eq("child exit status", WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  stop = true;
  while (finished.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::sort(fork_ms.begin(), fork_ms.end());
  // Generous for a loaded CI machine (typically 10-20 ms); without the gate it was seconds.
  if (fork_ms.back() > 1500) expect_eq("longest fork (ms) over 1500", fork_ms.back(), 0);
  std::printf("fork under a flood: median %lld ms, longest %lld ms; failures=%d\n",
              static_cast<long long>(fork_ms[fork_ms.size() / 2]), static_cast<long long>(fork_ms.back()), g_failures);
  std::fflush(stdout);
  gmt::recorder::finish(/*close=*/true);
  return g_failures == 0 ? 0 : 1;
}

// Threads under NeverWaitScope (recorder.h: PyTorch's allocator callback, NVTX memory calls) record as fast as they
// can, without stacks, so the writer falls far behind: past the bound their full chunks are dropped and counted in
// dropped_events. A dropped chunk is reused in place, which is safe only while the writer is not reading it (it
// reads published slots outside the recorder's lock). The case that broke: one more never-wait thread that
// records slowly, whose filling chunk the writer reads while it fills; when that chunk is dropped, a reset under
// the writer skipped the first events of its next fill (neither written nor counted) and counted twice those the
// writer had taken. Every event is distinct, so the trace must hold each at most once, only real ones, and exactly
// what was made less the dropped ones.
int run_never_wait(const std::string& path, int flooders, int slow_events) {
  use_trace(path);
  const int threads = flooders + 1;
  std::atomic<bool> stop{false};
  std::atomic<int> finished{0};
  std::vector<std::atomic<int64_t>> made(static_cast<size_t>(threads));
  auto address_of = [](int t, int64_t i) {
    return (static_cast<uint64_t>(t + 1) << 40) + static_cast<uint64_t>(i) * 512;
  };
  for (int t = 0; t < threads; ++t) {
    std::thread([t, flooders, slow_events, &stop, &finished, &made, address_of] {
      gmt::recorder::NeverWaitScope never_wait;
      int64_t i = 0;
      if (t < flooders) {
        for (; !stop.load(std::memory_order_relaxed); ++i) record_one(EventKind::Alloc, address_of(t, i), 512, false);
      } else {
        for (; i < slow_events; ++i) {
          record_one(EventKind::Alloc, address_of(t, i), 512, false);
          timespec pause_for{0, 20000};
          nanosleep(&pause_for, nullptr);
        }
        stop = true;
      }
      made[static_cast<size_t>(t)] = i;
      finished.fetch_add(1);
      for (;;) pause();  // see run_threads
    }).detach();
  }
  while (finished.load() < threads) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  gmt::recorder::finish(/*close=*/true);

  int64_t made_total = 0;
  for (int t = 0; t < threads; ++t) {
    made_total += made[static_cast<size_t>(t)];
    const std::string beyond =
        "SELECT count(*) FROM events WHERE kind = 1 AND address >> 40 = " + std::to_string(t + 1) +
        " AND (address & 1099511627775) / 512 >= " + std::to_string(made[static_cast<size_t>(t)]);
    expect_eq("events beyond those a thread made", query_int(path, beyond.c_str()), 0);
  }
  const int64_t written = query_int(path, "SELECT count(*) FROM events WHERE kind = 1");
  const int64_t dropped = query_int(path, "SELECT coalesce((SELECT value FROM meta WHERE key = 'dropped_events'), 0)");
  expect_eq("events written plus events dropped", written + dropped, made_total);
  expect_eq("events written twice",
            written - query_int(path, "SELECT count(DISTINCT address) FROM events WHERE kind = 1"), 0);
  const std::string foreign = "SELECT count(*) FROM events WHERE kind = 1 AND NOT ((address >> 40) BETWEEN 1 AND " +
                              std::to_string(threads) + " AND (address & 1099511627775) % 512 = 0 AND size = 512)";
  expect_eq("events that were never made", query_int(path, foreign.c_str()), 0);
  // Each thread's events are in the order it made them: a reused slot read late would show as a step back.
  expect_eq("events out of their thread's order",
            query_int(path, "SELECT count(*) FROM (SELECT address, lag(address) OVER (PARTITION BY address >> 40 "
                            "ORDER BY id) AS previous FROM events WHERE kind = 1) WHERE address <= previous"),
            0);
  // A thread's chunk holds its events 1024 at a time from its first (the buffer is fresh), and a drop loses what
  // the writer had not taken of one chunk: what is written of each run of 1024 is a prefix of it. A chunk reset
  // under the writer's count of what it took wrote a later part of the next fill instead (its start skipped).
  expect_eq("chunks whose written events are not their first ones",
            query_int(path, "SELECT count(*) FROM (SELECT min(i % 1024) AS first, max(i % 1024) AS last, count(*) AS n "
                            "FROM (SELECT address >> 40 AS t, (address & 1099511627775) / 512 AS i FROM events "
                            "WHERE kind = 1) GROUP BY t, i / 1024) WHERE first != 0 OR last != n - 1"),
            0);
  if (dropped <= 0) expect_eq("events dropped (the writer kept up: the drop path was not exercised)", dropped, 1);
  std::printf("never-wait: %d flooding threads and one slow one, %lld events made, %lld written, %lld dropped; "
              "failures=%d\n",
              flooders, static_cast<long long>(made_total), static_cast<long long>(written),
              static_cast<long long>(dropped), g_failures);
  return g_failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "threads") == 0) {
    return run_threads(argv[2], argc > 3 ? std::atoi(argv[3]) : 8, argc > 4 ? std::atoi(argv[4]) : 20000);
  }
  if (argc >= 3 && std::strcmp(argv[1], "signal-flush") == 0) return run_signal_flush(argv[2]);
  if (argc >= 3 && std::strcmp(argv[1], "fork-flood") == 0) return run_fork_flood(argv[2]);
  if (argc >= 3 && std::strcmp(argv[1], "never-wait") == 0) {
    return run_never_wait(argv[2], argc > 3 ? std::atoi(argv[3]) : 3, argc > 4 ? std::atoi(argv[4]) : 30000);
  }
  std::fprintf(stderr, "usage: recorder_stress threads|signal-flush|fork-flood|never-wait TRACE [threads] [n]\n");
  return 2;
}
