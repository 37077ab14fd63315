#include "recorder/stop_reason.h"

#include <sqlite3.h>

#include "schema/trace_init.h"
#include "schema/trace_schema.h"

namespace gmt::recorder {

std::string stop_reason_for_write_error(const std::string& sqlite_message) {
  // SQLite's messages for its error codes are fixed strings; SQLITE_FULL's is "database or disk is full".
  bool full = sqlite_message.find(sqlite3_errstr(SQLITE_FULL)) != std::string::npos;
  return (full ? "disk full: " : "write failed: ") + sqlite_message;
}

bool store_stop_reason(const std::string& trace_path, const std::string& reason) {
  sqlite3* db = nullptr;
  // The failed transaction was rolled back when the writer closed its connection; its frames in the WAL are
  // overwritten by this one, so on a full disk it usually still fits.
  bool ok = sqlite3_open_v2(trace_path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK;
  if (ok) {
    sqlite3_busy_timeout(db, 1000);
    ok = schema::set_meta(db, schema::meta::kStopReason, reason);
  }
  sqlite3_close(db);
  return ok;
}

}  // namespace gmt::recorder
