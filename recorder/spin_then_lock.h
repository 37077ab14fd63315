// Taking the recorder's mutex on the hot path when other threads hold it for a moment.
#pragma once

#include <pthread.h>

#include <mutex>

namespace gmt::recorder {

// Waits for `mutex` by watching it for a short while before sleeping. Under contention std::mutex puts the
// waiter to sleep in the kernel (futex) and the wake-up costs microseconds, where the recorder holds its mutex for
// tens of nanoseconds (an event's copy). The watch reads the lock word (glibc's pthread_mutex_t) and tries to
// take it only once it reads free, so waiting threads do not take the cache line from the holder by writing.
// Bounded: a holder that was preempted is waited for in the kernel, as before.
inline std::unique_lock<std::mutex> spin_then_lock(std::mutex& mutex) {
  constexpr int kWatches = 64;  // ~64 pause instructions and loads: a few microseconds at most
  int* word = &mutex.native_handle()->__data.__lock;
  for (int i = 0; i < kWatches; ++i) {
    if (__atomic_load_n(word, __ATOMIC_RELAXED) == 0 && mutex.try_lock()) {
      return std::unique_lock<std::mutex>(mutex, std::adopt_lock);
    }
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
  return std::unique_lock<std::mutex>(mutex);
}

}  // namespace gmt::recorder
