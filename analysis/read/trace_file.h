// Opening a trace file: the one place that decides whether a file is a trace we can read, and says why not.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace gmt::analysis {

// A trace that cannot be read. what() is a complete sentence for the user, naming the file; the CLI prints
// it after "gpumemtrace: " and exits with kExitBadInput.
class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A trace SQLite finds malformed (truncated, overwritten): salvage.h can still give back what it holds.
class TraceDamaged : public TraceError {
 public:
  using TraceError::TraceError;
};

// Whether an SQLite result code means the file is damaged rather than, say, locked or missing.
bool is_damage_code(int sqlite_code);

enum class OpenMode { ReadOnly, ReadWrite };

// An open, validated trace. Checks, in order: the file exists and is readable, it is an SQLite database,
// it is a gpumemtrace trace (application_id), its schema version is one this build reads, and the required
// tables (meta, events) are there; the others are optional (trace_tables.h: a missing one degrades its part of
// the report). A malformed file throws TraceDamaged. A trace still being written (WAL mode) can be opened
// read-only at any moment.
class TraceFile {
 public:
  static TraceFile open(const std::string& path, OpenMode mode = OpenMode::ReadOnly);

  TraceFile(TraceFile&& other) noexcept;
  TraceFile& operator=(TraceFile&& other) noexcept;
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;
  ~TraceFile();

  sqlite3* db() const { return db_; }
  const std::string& path() const { return path_; }
  int schema_version() const { return schema_version_; }
  // Whether the trace has this table (read once, at open).
  bool has_table(const std::string& name) const;

  // meta table lookups; nullopt when the key is absent.
  std::optional<std::string> meta(const std::string& key) const;
  std::optional<int64_t> meta_int(const std::string& key) const;

  // Runs SQL with no result rows; throws TraceError naming the file and SQLite's message.
  void exec(const char* sql) const;

 private:
  TraceFile(sqlite3* db, std::string path, int schema_version);
  sqlite3* db_ = nullptr;
  std::string path_;
  int schema_version_ = 0;
  std::vector<std::string> tables_;
};

// A prepared statement that finalizes itself. step() returns true while there is a row.
class Statement {
 public:
  Statement(const TraceFile& trace, const char* sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  bool step();
  void reset();
  void bind(int index, int64_t value);
  void bind(int index, const std::string& value);
  void bind_null(int index);
  int64_t column_int(int index) const;
  std::optional<std::string> column_text(int index) const;  // nullopt for NULL
  bool column_is_null(int index) const;
  int column_count() const;

 private:
  const TraceFile& trace_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace gmt::analysis
