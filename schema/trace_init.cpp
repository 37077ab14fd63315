#include "schema/trace_init.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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

sqlite3* create_trace_file(const std::string& path, std::string& error) {
  int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) {
    error = "cannot create '" + path + "': " + std::strerror(errno);
    return nullptr;
  }
  ::close(fd);
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    error = "cannot open '" + path + "': " + (db ? sqlite3_errmsg(db) : "out of memory");
    sqlite3_close(db);
    return nullptr;
  }
  if (!initialize_trace(db, error)) {
    sqlite3_close(db);
    return nullptr;
  }
  return db;
}

bool initialize_trace(sqlite3* db, std::string& error) {
  // WAL lets `report` read a trace while the app is still writing it, and keeps every committed batch
  // readable if the process dies. NORMAL sync: an app crash loses nothing committed; only a power loss could
  // lose the last batch.
  std::string setup = "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                      "PRAGMA application_id=" +
                      std::to_string(kApplicationId) +
                      ";"
                      "PRAGMA user_version=" +
                      std::to_string(kSchemaVersion) + ";";
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

bool set_meta(sqlite3_stmt* set_meta_statement, std::string_view key, std::string_view value) {
  // Static bindings: the texts outlive the step, and the bindings are cleared before returning.
  sqlite3_bind_text(set_meta_statement, 1, key.data(), static_cast<int>(key.size()), SQLITE_STATIC);
  sqlite3_bind_text(set_meta_statement, 2, value.data(), static_cast<int>(value.size()), SQLITE_STATIC);
  bool ok = sqlite3_step(set_meta_statement) == SQLITE_DONE;
  sqlite3_reset(set_meta_statement);
  sqlite3_clear_bindings(set_meta_statement);
  return ok;
}

bool set_meta(sqlite3* db, std::string_view key, std::string_view value) {
  sqlite3_stmt* statement = nullptr;
  if (sqlite3_prepare_v2(db, kSetMetaSql, -1, &statement, nullptr) != SQLITE_OK) return false;
  bool ok = set_meta(statement, key, value);
  sqlite3_finalize(statement);
  return ok;
}

}  // namespace gmt::schema
