#include "analysis/read/trace_file.h"

#include <fmt/core.h>

#include <sys/stat.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "schema/trace_schema.h"

namespace gmt::analysis {
namespace {

// Looks at the first bytes ourselves, so that "not SQLite at all" gets its own message instead of
// SQLite's generic "file is not a database".
void check_file_header(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    throw TraceError(fmt::format("cannot open trace '{}': {}", path, std::strerror(errno)));
  }
  if (S_ISDIR(st.st_mode)) throw TraceError(fmt::format("'{}' is a directory, not a trace file", path));
  if (st.st_size == 0) {
    throw TraceError(fmt::format("'{}' is empty (0 bytes): the profiled process wrote nothing to it", path));
  }
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw TraceError(fmt::format("cannot read trace '{}': {}", path, std::strerror(errno)));
  char header[16] = {};
  size_t got = std::fread(header, 1, sizeof header, f);
  std::fclose(f);
  if (got < sizeof header || std::memcmp(header, "SQLite format 3", 16) != 0) {
    throw TraceError(fmt::format("'{}' is not a gpumemtrace trace (not an SQLite database)", path));
  }
}

// TraceDamaged when the code says the file is malformed, else TraceError.
[[noreturn]] void throw_read_error(int code, const std::string& message) {
  if (is_damage_code(code)) throw TraceDamaged(message);
  throw TraceError(message);
}

int64_t pragma_int(sqlite3* db, const std::string& path, const char* pragma) {
  sqlite3_stmt* stmt = nullptr;
  std::string sql = fmt::format("PRAGMA {}", pragma);
  if (int rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr); rc != SQLITE_OK) {
    std::string message = sqlite3_errmsg(db);
    sqlite3_finalize(stmt);
    throw_read_error(rc, fmt::format("cannot read trace '{}': {}", path, message));
  }
  int rc = sqlite3_step(stmt);
  int64_t value = rc == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : 0;
  sqlite3_finalize(stmt);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    throw_read_error(
        rc, fmt::format("cannot read trace '{}': {} (is the file truncated or damaged?)", path, sqlite3_errstr(rc)));
  }
  return value;
}

std::vector<std::string> read_table_names(const TraceFile& trace) {
  std::vector<std::string> names;
  Statement tables(trace, "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')");
  while (tables.step()) names.push_back(tables.column_text(0).value_or(""));
  return names;
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

// An SQLite URI naming `path` (RFC 3986: '%', '?' and '#' would end or escape the path, so they are encoded).
std::string file_uri(const std::string& path, const char* query) {
  std::string uri = path.rfind("/", 0) == 0 ? "file://" : "file:";  // "file:///abs": an empty authority
  for (unsigned char c : path) {
    if (c == '%' || c == '?' || c == '#' || c < 0x20 || c >= 0x7f) {
      uri += fmt::format("%{:02X}", c);
    } else {
      uri += static_cast<char>(c);
    }
  }
  return uri + "?" + query;
}

// Reading never writes, beside the trace either. A trace is in WAL mode, and a read-only connection to it
// would still create "-wal" and "-shm" files next to it and leave them there. Without a "-wal" file no
// connection is writing the trace (the writer's connection keeps one from its first write to its close, and
// only a checkpoint from it changes the main file), so the file is opened immutable: no lock, no -shm, no
// -wal. With one (a trace being written, or one whose process was killed), the committed rows are partly in
// it, so the connection reads through it, sharing the writer's -shm as SQLite requires.
std::string read_only_uri(const std::string& path) {
  return file_uri(path, file_exists(path + "-wal") ? "mode=ro" : "immutable=1");
}

}  // namespace

bool is_damage_code(int sqlite_code) {
  const int primary = sqlite_code & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB || primary == SQLITE_IOERR || primary == SQLITE_FORMAT;
}

TraceFile TraceFile::open(const std::string& path, OpenMode mode) {
  check_file_header(path);
  sqlite3* db = nullptr;
  // NOMUTEX: a TraceFile is used by one thread at a time; SQLite's per-call connection mutex would cost
  // two lock operations per column read (measured: ~5% of `report`).
  int flags = (mode == OpenMode::ReadOnly ? SQLITE_OPEN_READONLY | SQLITE_OPEN_URI : SQLITE_OPEN_READWRITE) |
              SQLITE_OPEN_NOMUTEX;
  std::string name = mode == OpenMode::ReadOnly ? read_only_uri(path) : path;
  int rc = sqlite3_open_v2(name.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    throw TraceError(fmt::format("cannot open trace '{}': {}", path, message));
  }
  sqlite3_busy_timeout(db, 5000);  // the writer may hold a lock for a moment while it commits a batch
  TraceFile trace(db, path, 0);

  int64_t application_id = pragma_int(db, path, "application_id");
  if (application_id != schema::kApplicationId) {
    throw TraceError(fmt::format("'{}' is an SQLite database but not a gpumemtrace trace", path));
  }
  int64_t version = pragma_int(db, path, "user_version");
  if (version > schema::kSchemaVersion) {
    throw TraceError(
        fmt::format("'{}' was written with trace schema version {}, but this gpumemtrace reads versions up to {}: "
                    "use a newer gpumemtrace",
                    path, version, schema::kSchemaVersion));
  }
  if (version < 1) throw TraceError(fmt::format("'{}' has no valid schema version ({})", path, version));
  trace.schema_version_ = static_cast<int>(version);

  trace.tables_ = read_table_names(trace);
  // From v12 on, events is a view of event_rows and event_types (schema/trace_schema.h): all three are needed.
  const std::vector<const char*> required =
      version >= 12 ? std::vector<const char*>{"meta", "event_rows", "event_types", "events"}
                    : std::vector<const char*>{"meta", "events"};
  for (const char* table : required) {
    if (!trace.has_table(table)) {
      throw TraceError(
          fmt::format("'{}' has no {} table, which every trace needs: it cannot be reported", path, table));
    }
  }
  // Touch the tables every report reads, so that a damaged file fails here rather than halfway through.
  for (const char* table : {"meta", "events", "stacks", "stack_frames", "modules", "symbols"}) {
    if (!trace.has_table(table)) continue;
    std::string sql = fmt::format("SELECT count(*) FROM {}", table);
    try {
      Statement count(trace, sql.c_str());
      count.step();
    } catch (const TraceDamaged& e) {
      throw TraceDamaged(
          fmt::format("'{}' is damaged or truncated: table '{}' cannot be read ({})", path, table, e.what()));
    }
  }
  // v12: every event's kind, api, source, memory kind, device and context is one row of the small event_types
  // table, so bytes damaged there would change the meaning of every event without SQLite noticing. Its rows must
  // agree with its UNIQUE index (a check of a few dozen rows); a damaged table is salvaged like a damaged file.
  if (version >= 12) {
    std::string verdict;
    try {
      Statement check(trace, "PRAGMA integrity_check(event_types)");
      verdict = check.step() ? check.column_text(0).value_or("") : "";
    } catch (const TraceDamaged& e) {
      verdict = e.what();
    }
    if (verdict != "ok") {
      throw TraceDamaged(fmt::format("'{}' is damaged: table 'event_types' fails its check ({})", path, verdict));
    }
  }
  return trace;
}

TraceFile::TraceFile(sqlite3* db, std::string path, int schema_version)
    : db_(db), path_(std::move(path)), schema_version_(schema_version) {}

TraceFile::TraceFile(TraceFile&& other) noexcept
    : db_(other.db_),
      path_(std::move(other.path_)),
      schema_version_(other.schema_version_),
      tables_(std::move(other.tables_)) {
  other.db_ = nullptr;
}

TraceFile& TraceFile::operator=(TraceFile&& other) noexcept {
  if (this != &other) {
    sqlite3_close(db_);
    db_ = other.db_;
    path_ = std::move(other.path_);
    schema_version_ = other.schema_version_;
    tables_ = std::move(other.tables_);
    other.db_ = nullptr;
  }
  return *this;
}

TraceFile::~TraceFile() { sqlite3_close(db_); }

bool TraceFile::has_table(const std::string& name) const {
  return std::find(tables_.begin(), tables_.end(), name) != tables_.end();
}

std::optional<std::string> TraceFile::meta(const std::string& key) const {
  Statement query(*this, "SELECT value FROM meta WHERE key = ?1");
  query.bind(1, key);
  if (!query.step()) return std::nullopt;
  return query.column_text(0);
}

std::optional<int64_t> TraceFile::meta_int(const std::string& key) const {
  auto text = meta(key);
  if (!text) return std::nullopt;
  try {
    return std::stoll(*text);
  } catch (const std::exception&) {
    throw TraceError(fmt::format("'{}' has a malformed meta value {}='{}'", path_, key, *text));
  }
}

void TraceFile::exec(const char* sql) const {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    throw TraceError(fmt::format("cannot update trace '{}': {}", path_, message));
  }
}

Statement::Statement(const TraceFile& trace, const char* sql) : trace_(trace) {
  if (int rc = sqlite3_prepare_v2(trace.db(), sql, -1, &stmt_, nullptr); rc != SQLITE_OK) {
    std::string message = sqlite3_errmsg(trace.db());
    sqlite3_finalize(stmt_);
    stmt_ = nullptr;
    throw_read_error(rc, fmt::format("cannot read trace '{}': {}", trace.path(), message));
  }
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

bool Statement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  throw_read_error(rc, fmt::format("cannot read trace '{}': {} (is the file truncated or damaged?)", trace_.path(),
                                   sqlite3_errmsg(trace_.db())));
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

void Statement::bind(int index, int64_t value) { sqlite3_bind_int64(stmt_, index, value); }

void Statement::bind(int index, const std::string& value) {
  sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
}

void Statement::bind_null(int index) { sqlite3_bind_null(stmt_, index); }

int64_t Statement::column_int(int index) const { return sqlite3_column_int64(stmt_, index); }

std::optional<std::string> Statement::column_text(int index) const {
  if (sqlite3_column_type(stmt_, index) == SQLITE_NULL) return std::nullopt;
  const unsigned char* text = sqlite3_column_text(stmt_, index);
  return std::string(reinterpret_cast<const char*>(text), sqlite3_column_bytes(stmt_, index));
}

bool Statement::column_is_null(int index) const { return sqlite3_column_type(stmt_, index) == SQLITE_NULL; }

int Statement::column_count() const { return sqlite3_column_count(stmt_); }

}  // namespace gmt::analysis
