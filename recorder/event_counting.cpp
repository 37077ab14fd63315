#include "recorder/event_counting.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <new>

#include "recorder/settings.h"

namespace gmt::recorder {

schema::EventCounters* map_shared_event_counters() {
  const Settings& s = settings();
  // Forked and exec'ed children have pids of their own: the counts are the started process's only.
  if (s.event_counters_path.empty() || s.root_pid != static_cast<long>(getpid())) return nullptr;
  const int fd = ::open(s.event_counters_path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st {};
  void* mapped = MAP_FAILED;
  if (::fstat(fd, &st) == 0 && st.st_size == static_cast<off_t>(sizeof(schema::EventCounters))) {
    mapped = ::mmap(nullptr, sizeof(schema::EventCounters), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  ::close(fd);
  if (mapped == MAP_FAILED) return nullptr;
  auto* counters = static_cast<schema::EventCounters*>(mapped);
  // `run` created the file zero-filled: constructed here the first time, counted on by a later image.
  if (counters->magic.load(std::memory_order_relaxed) != schema::kEventCountersMagic) {
    counters = new (mapped) schema::EventCounters;
    counters->magic.store(schema::kEventCountersMagic, std::memory_order_relaxed);
  }
  return counters;
}

}  // namespace gmt::recorder
