#include "schema/trace_init.h"

#include <string>

#include "schema/trace_schema.h"

namespace gmt::schema {
namespace {

bool exec(sqlite3* db, const std::string& sql, std::string& error) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message) == SQLITE_OK) return true;
  error = message ? message : sqlite3_errmsg(db);
  sqlite3_free(message);
  return false;
}

// Lookup tables make the codes readable from plain sqlite3: JOIN apis ON apis.id = events.api.
template <typename Enum>
bool fill_lookup_table(sqlite3* db, const char* table, int max_value, std::string& error) {
  std::string sql = std::string("INSERT INTO ") + table + "(id, name) VALUES (?1, ?2)";
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
    error = sqlite3_errmsg(db);
    return false;
  }
  bool ok = true;
  for (int v = 0; v <= max_value && ok; ++v) {
    auto name = to_string(static_cast<Enum>(v));
    if (name == "unknown" && v != 0) continue;  // a gap in the enum
    sqlite3_bind_int(stmt, 1, v);
    sqlite3_bind_text(stmt, 2, name.data(), static_cast<int>(name.size()), SQLITE_TRANSIENT);
    ok = sqlite3_step(stmt) == SQLITE_DONE;
    sqlite3_reset(stmt);
  }
  if (!ok) error = sqlite3_errmsg(db);
  sqlite3_finalize(stmt);
  return ok;
}

}  // namespace

bool initialize_trace(sqlite3* db, std::string& error) {
  // WAL lets `report` read a trace while the app is still writing it, and keeps every committed batch
  // readable if the process dies. NORMAL sync: an app crash loses nothing committed; only a power loss could
  // lose the last batch.
  std::string setup = "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                      "PRAGMA application_id=" + std::to_string(kApplicationId) + ";"
                      "PRAGMA user_version=" + std::to_string(kSchemaVersion) + ";";
  if (!exec(db, setup, error) || !exec(db, "BEGIN", error)) return false;
  bool ok = exec(db, kCreateSchemaSql, error) &&
            fill_lookup_table<EventKind>(db, "event_kinds", kMaxEventKind, error) &&
            fill_lookup_table<MemoryKind>(db, "memory_kinds", kMaxMemoryKind, error) &&
            fill_lookup_table<Api>(db, "apis", kMaxApi, error) &&
            fill_lookup_table<Source>(db, "sources", kMaxSource, error) && exec(db, "COMMIT", error);
  if (!ok) {
    std::string ignored;
    exec(db, "ROLLBACK", ignored);
  }
  return ok;
}

}  // namespace gmt::schema
