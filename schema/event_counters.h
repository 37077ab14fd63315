// The event counters that outlive the process `run` started: a small file `run` creates and names in
// GMT_EVENT_COUNTERS, which that process's preload library maps shared and keeps counting into. After the app
// has ended, however it ended (SIGKILL and the OOM killer included, where nothing of ours runs), `run` reads them:
// events produced less events committed to the trace, less events dropped and counted elsewhere, is how many
// events were still in the buffers or the writer's unfinished transaction: meta events_lost_at_exit.
//
// Why per-thread slots: a producer adds one to its own slot, a line no other thread writes, with a plain store
// (no read-modify-write, no line bouncing between cores); only the writer thread adds to `committed`, once per
// transaction. Threads beyond the slots (more than kEventCounterSlots recording at once) share `produced_shared`
// with an atomic add.
//
// Covered: the process `run` started, across exec (the same pid: its images count on in the same file). Not
// covered: forked and exec'ed children (their own pids), which count privately and whose traces say only that they
// are incomplete.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace gmt::schema {

inline constexpr uint64_t kEventCountersMagic = 0x31544e434d544d47ull;  // "GMTMCNT1"
inline constexpr size_t kEventCounterSlots = 1020;

struct alignas(64) EventCounterSlot {
  std::atomic<uint64_t> value{0};
};

// The file's layout: a zero-filled file is a valid empty one (run creates it with ftruncate); the library writes
// `magic` when it attaches.
struct EventCounters {
  std::atomic<uint64_t> magic{0};
  alignas(64) std::atomic<uint64_t> committed{0};  // events in committed transactions of the trace
  // Events produced and then dropped on purpose (profiling had stopped; dropped_events): not lost by the exit.
  alignas(64) std::atomic<uint64_t> discarded{0};
  alignas(64) std::atomic<uint64_t> produced_shared{0};  // late events, and threads without a slot
  std::atomic<uint32_t> slots_taken{0};
  // Events that came after the trace was closed (its library's destructor ran): frees and teardown work of
  // libraries finalized after ours (a static object's destructor in a library the app linked). Never in the
  // trace and not in `produced`: `run` stores them as meta events_after_close / frees_after_close. Rare, so an
  // atomic add on this shared line costs nothing that matters.
  std::atomic<uint64_t> events_after_close{0};
  std::atomic<uint64_t> frees_after_close{0};
  EventCounterSlot produced[kEventCounterSlots];  // one per recording thread (a buffer's, reused with it)

  // Events produced and not accounted for; 0 while the counts are consistent. Read after the process is gone.
  uint64_t pending() const {
    uint64_t produced_total = produced_shared.load(std::memory_order_relaxed);
    for (const EventCounterSlot& slot : produced) produced_total += slot.value.load(std::memory_order_relaxed);
    const uint64_t accounted = committed.load(std::memory_order_relaxed) + discarded.load(std::memory_order_relaxed);
    return produced_total > accounted ? produced_total - accounted : 0;
  }
};
static_assert(sizeof(EventCounters) == 65536, "one 64 KiB file");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared between processes");

}  // namespace gmt::schema
