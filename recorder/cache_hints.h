// Cache hints for the hot path.
#pragma once

#include <cstddef>

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
