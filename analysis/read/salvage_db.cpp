#include "analysis/read/salvage_db.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "schema/trace_schema.h"

namespace gmt::analysis::salvage {
namespace {

std::string upper(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::toupper(c); });
  return text;
}

char affinity_of(const std::string& declared) {
  const std::string type = upper(declared);
  if (type.find("INT") != std::string::npos) return 'i';
  if (type.find("TEXT") != std::string::npos || type.find("CHAR") != std::string::npos) return 't';
  return '?';
}

// The current schema's CREATE statements, as SQLite stores them: the one place that knows our tables. Tables by
// name; views and triggers in the order they were made (a trigger after its view).
std::map<std::string, std::string> current_schema_sql(std::vector<std::string>& views) {
  sqlite3* db = nullptr;
  std::map<std::string, std::string> statements;
  if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) == SQLITE_OK &&
      sqlite3_exec(db, schema::kCreateSchemaSql, nullptr, nullptr, nullptr) == SQLITE_OK) {
    sqlite3_stmt* rows = nullptr;
    sqlite3_prepare_v2(db,
                       "SELECT type, name, sql FROM sqlite_master WHERE type IN ('table', 'view', 'trigger') "
                       "ORDER BY rowid",
                       -1, &rows, nullptr);
    while (rows && sqlite3_step(rows) == SQLITE_ROW) {
      const std::string type = reinterpret_cast<const char*>(sqlite3_column_text(rows, 0));
      const char* sql = reinterpret_cast<const char*>(sqlite3_column_text(rows, 2));
      if (type == "table") {
        statements[reinterpret_cast<const char*>(sqlite3_column_text(rows, 1))] = sql;
      } else {
        views.emplace_back(sql);
      }
    }
    sqlite3_finalize(rows);
  }
  sqlite3_close(db);
  if (statements.empty()) throw std::runtime_error("the trace schema cannot be created in memory");
  return statements;
}

bool value_fits(const sqlite_file::Value& value, char affinity, bool not_null) {
  if (value.is_null()) return !not_null;
  if (affinity == 'i') return value.is_int();
  if (affinity == 't') return value.is_text && std::holds_alternative<std::string>(value.data);
  return true;
}

void bind(sqlite3_stmt* statement, int index, const sqlite_file::Value& value) {
  if (const auto* number = std::get_if<int64_t>(&value.data)) {
    sqlite3_bind_int64(statement, index, *number);
  } else if (const auto* real = std::get_if<double>(&value.data)) {
    sqlite3_bind_double(statement, index, *real);
  } else if (const auto* bytes = std::get_if<std::string>(&value.data)) {
    if (value.is_text) {
      sqlite3_bind_text(statement, index, bytes->data(), static_cast<int>(bytes->size()), SQLITE_TRANSIENT);
    } else {
      sqlite3_bind_blob(statement, index, bytes->data(), static_cast<int>(bytes->size()), SQLITE_TRANSIENT);
    }
  } else {
    sqlite3_bind_null(statement, index);
  }
}

}  // namespace

SalvageDb::SalvageDb(const std::string& path, int64_t application_id, int64_t user_version)
    : current_sql_(current_schema_sql(current_views_)) {
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
    std::string message = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw std::runtime_error("cannot create the salvaged database: " + message);
  }
  // A scratch file that lives as long as the report: no journal, no syncs.
  exec("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;");
  exec(fmt::format("PRAGMA application_id={}; PRAGMA user_version={}; BEGIN;", application_id, user_version).c_str());
}

SalvageDb::~SalvageDb() {
  for (Table& table : tables_) {
    for (auto& [values, statement] : table.inserts) sqlite3_finalize(statement);
  }
  sqlite3_close(db_);
}

void SalvageDb::exec(const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    throw std::runtime_error("cannot write the salvaged database: " + message);
  }
}

bool SalvageDb::add_table(const std::string& name, const std::string& trace_sql, uint32_t root) {
  if (find(name) || current_sql_.count(name) == 0) return false;
  Table table;
  table.name = name;
  table.root = root;
  // The trace's own statement keeps an older trace's columns; a damaged one falls back to ours.
  const bool own = upper(trace_sql).rfind("CREATE TABLE", 0) == 0 && describe(table, trace_sql);
  if (!own && !describe(table, current_sql_[name])) return false;
  tables_.push_back(std::move(table));
  return true;
}

void SalvageDb::add_current_schema() {
  for (const auto& [name, sql] : current_sql_) add_table(name, sql, 0);
}

void SalvageDb::add_views() {
  if (!find("event_rows") || !find("event_types") || find("events")) return;
  for (const std::string& sql : current_views_) exec(sql.c_str());
}

// Runs one CREATE TABLE statement (only the first statement of the text) and reads the columns it made.
bool SalvageDb::describe(Table& table, const std::string& sql) {
  sqlite3_stmt* create = nullptr;
  const bool created = sqlite3_prepare_v2(db_, sql.c_str(), -1, &create, nullptr) == SQLITE_OK && create &&
                       sqlite3_step(create) == SQLITE_DONE;
  sqlite3_finalize(create);
  // The statement must have made the table it names (a damaged name would make another one).
  sqlite3_stmt* info = nullptr;
  const std::string pragma = fmt::format("PRAGMA table_info(\"{}\")", table.name);
  if (!created || sqlite3_prepare_v2(db_, pragma.c_str(), -1, &info, nullptr) != SQLITE_OK) {
    sqlite3_finalize(info);
    return false;
  }
  int primary_keys = 0;
  int integer_key = -1;
  while (sqlite3_step(info) == SQLITE_ROW) {
    const char* type = reinterpret_cast<const char*>(sqlite3_column_text(info, 2));
    table.columns.push_back(reinterpret_cast<const char*>(sqlite3_column_text(info, 1)));
    table.affinity.push_back(affinity_of(type ? type : ""));
    table.not_null.push_back(sqlite3_column_int(info, 3) != 0);
    if (sqlite3_column_int(info, 5) > 0) {
      ++primary_keys;
      if (type && upper(type) == "INTEGER") integer_key = static_cast<int>(table.columns.size()) - 1;
    }
  }
  sqlite3_finalize(info);
  table.without_rowid = upper(sql).find("WITHOUT ROWID") != std::string::npos;
  if (primary_keys == 1 && !table.without_rowid) table.ipk = integer_key;
  return !table.columns.empty();
}

Table* SalvageDb::find(const std::string& name) {
  for (Table& table : tables_) {
    if (table.name == name) return &table;
  }
  return nullptr;
}

bool SalvageDb::fits(const Table& table, const sqlite_file::Row& row, bool exact) {
  const size_t values = row.record.size();
  if (values == 0 || values > table.columns.size() || (exact && values != table.columns.size())) return false;
  for (size_t i = 0; i < values; ++i) {
    if (static_cast<int>(i) == table.ipk) {
      if (!row.record[i].is_null()) return false;
    } else if (!value_fits(row.record[i], table.affinity[i], table.not_null[i])) {
      return false;
    }
  }
  return true;
}

// INSERT OR IGNORE INTO t(<rowid>, the row's columns): the INTEGER PRIMARY KEY column takes the rowid; another
// rowid table takes it as rowid, so that a row read twice (from the tree and from a stale copy) is kept once.
sqlite3_stmt* SalvageDb::insert_statement(Table& table, size_t values) {
  auto cached = table.inserts.find(values);
  if (cached != table.inserts.end()) return cached->second;
  std::string columns;
  std::string parameters;
  if (!table.without_rowid && table.ipk < 0) {
    columns = "rowid";
    parameters = "?";
  }
  for (size_t i = 0; i < values; ++i) {
    columns += (columns.empty() ? "\"" : ", \"") + table.columns[i] + "\"";
    parameters += parameters.empty() ? "?" : ", ?";
  }
  const std::string sql = fmt::format("INSERT OR IGNORE INTO \"{}\" ({}) VALUES ({})", table.name, columns, parameters);
  sqlite3_stmt* statement = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &statement, nullptr) != SQLITE_OK) {
    sqlite3_finalize(statement);
    throw std::runtime_error("cannot write the salvaged database: " + std::string(sqlite3_errmsg(db_)));
  }
  table.inserts[values] = statement;
  return statement;
}

bool SalvageDb::insert(Table& table, const sqlite_file::Row& row) {
  if (!fits(table, row, false)) return false;
  sqlite3_stmt* statement = insert_statement(table, row.record.size());
  int index = 1;
  if (!table.without_rowid && table.ipk < 0) sqlite3_bind_int64(statement, index++, row.rowid);
  for (size_t i = 0; i < row.record.size(); ++i, ++index) {
    if (static_cast<int>(i) == table.ipk) {
      sqlite3_bind_int64(statement, index, row.rowid);
    } else {
      bind(statement, index, row.record[i]);
    }
  }
  const int rc = sqlite3_step(statement);
  const bool added = rc == SQLITE_DONE && sqlite3_changes(db_) > 0;
  sqlite3_reset(statement);
  sqlite3_clear_bindings(statement);
  if (added) ++table.rows;
  return added;
}

void SalvageDb::commit() { exec("COMMIT"); }

}  // namespace gmt::analysis::salvage
