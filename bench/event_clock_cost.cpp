// The cost of one event time stamp (recorder/event_clock.h): event_time_ns() in a tight loop, after the clock
// has published a TSC conversion, next to clock_gettime(CLOCK_MONOTONIC) for scale. Prints the median of
// ROUNDS rounds of CALLS calls each, in ns per call. For an A/B of two builds of event_clock.cpp, run the two
// binaries alternately, and each against itself (the A/A control) for the noise.
// Usage: event_clock_cost [ROUNDS [CALLS]]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <thread>
#include <vector>

#include "recorder/event_clock.h"

namespace {

template <typename F>
double median_ns_per_call(int rounds, long calls, F&& read) {
  std::vector<double> runs;
  uint64_t sink = 0;
  for (int r = 0; r < rounds; ++r) {
    auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < calls; ++i) sink += read();
    auto elapsed = std::chrono::steady_clock::now() - start;
    runs.push_back(std::chrono::duration<double, std::nano>(elapsed).count() / static_cast<double>(calls));
  }
  if (sink == 42) std::puts("");  // keeps the reads
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 21;
  const long calls = argc > 2 ? std::atol(argv[2]) : 2'000'000;
  using gmt::recorder::calibrate_event_clock;
  calibrate_event_clock();  // decides whether the TSC is used
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  calibrate_event_clock();  // publishes the first conversion
  std::printf("event clock: %s\n", gmt::recorder::event_clock_name());
  std::printf("event_time_ns: %.2f ns\n",
              median_ns_per_call(rounds, calls, [] { return gmt::recorder::event_time_ns(); }));
  std::printf("clock_gettime(CLOCK_MONOTONIC): %.2f ns\n", median_ns_per_call(rounds, calls, [] {
                timespec ts{};
                clock_gettime(CLOCK_MONOTONIC, &ts);
                return static_cast<uint64_t>(ts.tv_nsec);
              }));
  return 0;
}
