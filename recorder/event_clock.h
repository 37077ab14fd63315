// The time stamp of an event on the hot path: CLOCK_MONOTONIC nanoseconds, read from the CPU's time-stamp
// counter and converted with a scale that the writer thread keeps in step with the kernel's clock.
//
// Why: every recorded event reads the clock, and on the H200 hosts the vDSO's clock_gettime(CLOCK_MONOTONIC)
// costs 28-30 ns where the TSC read costs 16 (bench/query_cost; docs/benchmarks.md): two reads are ~0.03x of a
// cudaMallocAsync+cudaFreeAsync pair. The vDSO does the same conversion itself, behind a sequence lock and the
// kernel's NTP-adjusted scale; this one uses the scale measured over the last ~200 ms.
//
// Only where the kernel itself derives CLOCK_MONOTONIC from the TSC (clocksource "tsc": the kernel found it
// invariant and in step across CPUs) and after the first calibration interval; otherwise, and with
// GMT_EVENT_CLOCK=monotonic, it is clock_gettime. The two agree to a few microseconds (tests/unit/
// event_clock_test.cpp); times still never go backwards in the trace (record() keeps their order).
#pragma once

#include <cstdint>

namespace gmt::recorder {

// CLOCK_MONOTONIC in ns, for event time stamps. Async-signal-safe, lock-free.
uint64_t event_time_ns();

// Takes a (TSC, CLOCK_MONOTONIC) pair and, at least 50 ms after the previous one, publishes the conversion
// measured between the two. The writer thread calls it between batches; the first call (at load) decides
// whether the TSC is used at all. One thread at a time.
void calibrate_event_clock();

// In a forked child, before anything else reads the time: the fork may have caught the parent's writer thread
// halfway through publishing a conversion, and no thread here will finish it. Times are clock_gettime's until
// the child's own writer publishes a conversion again.
void reset_event_clock_after_fork();

// "tsc" when event_time_ns converts TSC reads, "clock_gettime" otherwise (for the trace's meta).
const char* event_clock_name();

}  // namespace gmt::recorder
