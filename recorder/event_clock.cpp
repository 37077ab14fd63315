// See event_clock.h. The conversion is published with a sequence lock (one writer: the calibrating thread);
// readers never wait for a lock and never write shared memory.
#include "recorder/event_clock.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <ctime>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "recorder/cache_hints.h"
#include "recorder/settings.h"

namespace gmt::recorder {
namespace {

constexpr uint64_t kMinCalibrationIntervalNs = 50'000'000;

uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

#if defined(__x86_64__)

// ns = ns_base + (tsc - tsc_base) * scale / 2^32. `sequence` is odd while the three are being replaced.
std::atomic<uint32_t> g_sequence{0};
std::atomic<uint64_t> g_tsc_base{0};
std::atomic<uint64_t> g_ns_base{0};
std::atomic<uint64_t> g_scale{0};
std::atomic<bool> g_converting{false};  // a conversion is published: event_time_ns reads the TSC

// The calibrating thread's own state.
bool g_decided = false;
bool g_tsc_usable = false;
uint64_t g_last_tsc = 0;
uint64_t g_last_ns = 0;

// Whether the kernel keeps CLOCK_MONOTONIC from the TSC: then it has found the TSC invariant and in step across
// CPUs (it falls back to another clocksource when it is not), and the two advance together.
bool kernel_clock_is_tsc() {
  int fd = ::open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char name[32] = {};
  ssize_t n = ::read(fd, name, sizeof name - 1);
  ::close(fd);
  return n >= 3 && std::strncmp(name, "tsc", 3) == 0 && (n == 3 || name[3] == '\n');
}

// One (TSC, CLOCK_MONOTONIC) pair: the TSC read between two clock reads, from the tightest of a few tries, and
// the middle of those two reads.
void sample(uint64_t& tsc, uint64_t& ns) {
  uint64_t best = ~uint64_t{0};
  for (int i = 0; i < 5; ++i) {
    uint64_t before = monotonic_ns();
    uint64_t t = __rdtsc();
    uint64_t after = monotonic_ns();
    if (after - before < best) {
      best = after - before;
      tsc = t;
      ns = before + (after - before) / 2;
    }
  }
}

// The sequence lock without a fence (ThreadSanitizer does not model atomic_thread_fence, and would miss a race
// here): each field is stored with release and loaded with acquire, which on x86-64 are the same plain moves as
// relaxed ones (only the compiler's reordering is constrained, as the fences did). Why it is still a sequence
// lock: a reader that loads a field value of a newer publication synchronizes with that field's release store,
// which comes after the odd `sequence` store here, so the reader's later load of `sequence` sees that odd value
// or a later one and differs from its first read; a reader whose first (acquire) load saw the even end of a
// publication sees all of its fields.
void publish(uint64_t tsc_base, uint64_t ns_base, uint64_t scale) {
  const uint32_t sequence = g_sequence.load(std::memory_order_relaxed);
  g_sequence.store(sequence + 1, std::memory_order_relaxed);
  g_tsc_base.store(tsc_base, std::memory_order_release);
  g_ns_base.store(ns_base, std::memory_order_release);
  g_scale.store(scale, std::memory_order_release);
  g_sequence.store(sequence + 2, std::memory_order_release);
  g_converting.store(true, std::memory_order_release);
}

#endif

}  // namespace

GMT_HOT uint64_t event_time_ns() {
#if defined(__x86_64__)
  if (g_converting.load(std::memory_order_acquire)) {
    // A publication takes nanoseconds; one never finished (a thread that died halfway) must not stall the app.
    for (int attempt = 0; attempt < 1000; ++attempt) {
      const uint32_t sequence = g_sequence.load(std::memory_order_acquire);
      // Acquire, not relaxed plus a fence: see publish(). The load of `sequence` below stays after them.
      const uint64_t tsc_base = g_tsc_base.load(std::memory_order_acquire);
      const uint64_t ns_base = g_ns_base.load(std::memory_order_acquire);
      const uint64_t scale = g_scale.load(std::memory_order_acquire);
      if ((sequence & 1) != 0 || g_sequence.load(std::memory_order_relaxed) != sequence) continue;
      // Signed: this read may be ordered before the base's (rdtsc does not wait for earlier loads).
      const auto ticks = static_cast<int64_t>(__rdtsc() - tsc_base);
      return ns_base + static_cast<uint64_t>(static_cast<int64_t>((static_cast<__int128>(ticks) * scale) >> 32));
    }
  }
#endif
  return monotonic_ns();
}

void calibrate_event_clock() {
#if defined(__x86_64__)
  if (!g_decided) {
    g_decided = true;
    g_tsc_usable = settings().tsc_event_clock && kernel_clock_is_tsc();
    if (g_tsc_usable) sample(g_last_tsc, g_last_ns);
    return;
  }
  if (!g_tsc_usable) return;
  // Called after every batch (every few ms under a flood): one clock read decides before the ten of a sample.
  if (monotonic_ns() - g_last_ns < kMinCalibrationIntervalNs) return;
  uint64_t tsc = 0, ns = 0;
  sample(tsc, ns);
  if (ns - g_last_ns < kMinCalibrationIntervalNs || tsc <= g_last_tsc) return;
  // The rate over the last interval, continued from its end: the kernel's own rate changes only by NTP's small
  // adjustments, so the next interval's times stay within microseconds of clock_gettime's.
  const auto scale = static_cast<uint64_t>((static_cast<unsigned __int128>(ns - g_last_ns) << 32) / (tsc - g_last_tsc));
  publish(tsc, ns, scale);
  g_last_tsc = tsc;
  g_last_ns = ns;
#endif
}

void reset_event_clock_after_fork() {
#if defined(__x86_64__)
  g_converting.store(false, std::memory_order_relaxed);
  g_sequence.store((g_sequence.load(std::memory_order_relaxed) | 1) + 1, std::memory_order_relaxed);  // even
#endif
}

const char* event_clock_name() {
#if defined(__x86_64__)
  if (g_tsc_usable) return "tsc";
#endif
  return "clock_gettime";
}

}  // namespace gmt::recorder
