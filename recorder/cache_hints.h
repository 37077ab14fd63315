// Cache hints for the hot path: code placement and prefetches.
#pragma once

#include <cstddef>

// Code placement. A recorded event runs right after the CUDA call it records, a driver call of 1-5 us whose own
// code and data have pushed ours out of the core's nearest caches: much of what an event costs is fetching its
// lines again, instructions included (docs/benchmarks.md). The functions of that path are GMT_HOT: GCC puts them
// into .text.hot, which the linker lays out as one run, so the path spans a few pages instead of the whole
// library's text. The rare branches of a hot function (a thread's first event, a full chunk, a stack new to the
// process) are GMT_COLD functions of their own: placed elsewhere, and kept out of the hot function's body.
#define GMT_HOT __attribute__((hot))
#define GMT_COLD __attribute__((cold, noinline))

namespace gmt::recorder {

// Asks for every cache line of [address, address + size) in a state that allows writing (x86 PREFETCHW, a no-op
// hint where unsupported; elsewhere the compiler's write prefetch). A hint: never faults, never waits.
inline void prefetch_for_writing(const void* address, size_t size) {
  constexpr size_t kLine = 64;
  const char* first = static_cast<const char*>(address);
  const char* last = first + size - 1;
  for (const char* at = first;; at += kLine) {
    if (at > last) at = last;  // the last line, however the object straddles lines
#if defined(__x86_64__)
    asm volatile("prefetchw %0" ::"m"(*at));
#else
    __builtin_prefetch(at, 1);
#endif
    if (at == last) break;
  }
}

}  // namespace gmt::recorder
