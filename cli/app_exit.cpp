#include "cli/app_exit.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sqlite3.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>

#include "cli/run_files.h"
#include "schema/event_counters.h"
#include "schema/trace_init.h"
#include "schema/trace_schema.h"

namespace gmt::cli {

std::string make_event_counters_file() {
  // In memory (tmpfs) where there is one: a shared mapping of a file on disk is written back now and then, and the
  // first store after each write-back faults in the app's thread.
  const std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : temporary_folder();
  remove_files_of_ended_runs(dir, "counters");
  std::string path = make_run_file(dir, "counters");
  if (path.empty()) return {};
  const bool sized = truncate(path.c_str(), sizeof(schema::EventCounters)) == 0;
  if (!sized) unlink(path.c_str());
  return sized ? path : std::string();
}

std::optional<EventsAtExit> take_events_at_exit(const std::string& path) {
  if (path.empty()) return std::nullopt;
  std::optional<EventsAtExit> lost;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  unlink(path.c_str());
  if (fd < 0) return lost;
  void* mapped = mmap(nullptr, sizeof(schema::EventCounters), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (mapped == MAP_FAILED) return lost;
  // The process is gone: nothing writes these any more.
  const auto* counters = static_cast<const schema::EventCounters*>(mapped);
  if (counters->magic.load(std::memory_order_relaxed) == schema::kEventCountersMagic) {
    lost = EventsAtExit{counters->pending(), counters->events_after_close.load(std::memory_order_relaxed),
                        counters->frees_after_close.load(std::memory_order_relaxed)};
  }
  munmap(mapped, sizeof(schema::EventCounters));
  return lost;
}

bool record_app_exit(const std::string& trace_path, const LaunchResult& result,
                     const std::optional<EventsAtExit>& events) {
  sqlite3* db = nullptr;
  // Not TraceFile: a trace the app left damaged is `report`'s to explain; here it only misses this fact.
  if (sqlite3_open_v2(trace_path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    fmt::print(stderr, "gpumemtrace: cannot store the app's exit status in '{}': {}\n", trace_path,
               db ? sqlite3_errmsg(db) : "out of memory");
    sqlite3_close(db);
    return false;
  }
  sqlite3_busy_timeout(db, 5000);
  namespace meta = schema::meta;
  // Exactly one of the two: a trace copied over another run's keeps no stale half.
  bool signaled = result.signal != 0;
  bool ok = sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr) == SQLITE_OK;
  ok = ok && schema::set_meta(db, signaled ? meta::kAppExitSignal : meta::kAppExitStatus,
                              std::to_string(signaled ? result.signal : result.exit_code));
  std::string other =
      fmt::format("DELETE FROM meta WHERE key = '{}'", signaled ? meta::kAppExitStatus : meta::kAppExitSignal);
  ok = ok && sqlite3_exec(db, other.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK;
  if (events) {
    ok = ok && schema::set_meta(db, meta::kEventsLostAtExit, std::to_string(events->lost));
    ok = ok && schema::set_meta(db, meta::kEventsAfterClose, std::to_string(events->events_after_close));
    ok = ok && schema::set_meta(db, meta::kFreesAfterClose, std::to_string(events->frees_after_close));
  }
  ok = ok && sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK;
  if (!ok) {
    fmt::print(stderr, "gpumemtrace: cannot store the app's exit status in '{}': {}\n", trace_path, sqlite3_errmsg(db));
  }
  sqlite3_close(db);
  return ok;
}

}  // namespace gmt::cli
