// recorder/event_clock.h against clock_gettime(CLOCK_MONOTONIC): the same time, to microseconds, before and
// after each recalibration, and never going backwards between two.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <thread>

#include "recorder/event_clock.h"

namespace {

using gmt::recorder::calibrate_event_clock;
using gmt::recorder::event_time_ns;

uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

bool kernel_clock_is_tsc() {
  FILE* f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  if (!f) return false;
  char name[32] = {};
  bool tsc = std::fgets(name, sizeof name, f) && std::strcmp(name, "tsc\n") == 0;
  std::fclose(f);
  return tsc;
}

// The largest distance of event_time_ns from clock_gettime over `reads` reads, counting only reads not
// interrupted between the two clock_gettime calls around them (a preempted read says nothing); and whether the
// event times ever went backwards.
struct Agreement {
  uint64_t worst_ns = 0;
  int compared = 0;
  bool went_backwards = false;
};

Agreement compare(int reads) {
  Agreement a;
  uint64_t previous = 0;
  for (int i = 0; i < reads; ++i) {
    uint64_t before = monotonic_ns();
    uint64_t event = event_time_ns();
    uint64_t after = monotonic_ns();
    if (event < previous) a.went_backwards = true;
    previous = event;
    if (after - before > 2000) continue;
    uint64_t off = event < before ? before - event : event > after ? event - after : 0;
    a.worst_ns = std::max(a.worst_ns, off);
    ++a.compared;
  }
  return a;
}

// One test: the calibration state is the process's, and its first call decides.
TEST(EventClockTest, AgreesWithClockGettimeAcrossRecalibrations) {
  calibrate_event_clock();  // the first point (the library takes it at load)
  const bool tsc = kernel_clock_is_tsc();
  EXPECT_STREQ(gmt::recorder::event_clock_name(), tsc ? "tsc" : "clock_gettime");
  // Before a second point there is no rate: clock_gettime itself.
  Agreement first = compare(10000);
  EXPECT_GT(first.compared, 1000);
  EXPECT_EQ(first.worst_ns, 0u) << "before the first rate, event times are clock_gettime's";
  for (int round = 0; round < 6; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    calibrate_event_clock();
    Agreement a = compare(200000);
    EXPECT_GT(a.compared, 1000) << "round " << round;
    // Microseconds at most (0 ns measured on the build machine: every time inside its bracket).
    EXPECT_LT(a.worst_ns, 5000u) << "round " << round;
    EXPECT_FALSE(a.went_backwards) << "round " << round << ": within one calibration the times only go forward";
  }
  // A forked child starts over from clock_gettime, whatever state the fork caught, and calibrates again.
  gmt::recorder::reset_event_clock_after_fork();
  EXPECT_EQ(compare(10000).worst_ns, 0u) << "after a fork, clock_gettime until the next conversion";
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  calibrate_event_clock();
  EXPECT_LT(compare(100000).worst_ns, 5000u);
}

}  // namespace
