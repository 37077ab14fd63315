#include "cli/app_exit.h"

#include <fmt/core.h>
#include <sqlite3.h>

#include "schema/trace_init.h"
#include "schema/trace_schema.h"

namespace gmt::cli {

bool record_app_exit(const std::string& trace_path, const LaunchResult& result) {
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
  ok = ok && sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK;
  if (!ok) {
    fmt::print(stderr, "gpumemtrace: cannot store the app's exit status in '{}': {}\n", trace_path, sqlite3_errmsg(db));
  }
  sqlite3_close(db);
  return ok;
}

}  // namespace gmt::cli
