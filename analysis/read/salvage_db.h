// The database a salvage writes (salvage.cpp): the trace's own tables, created again, and the rows read from the
// damaged file put back into them. Also says whether a row read from a page of unknown table can be a row of a
// given table (the page's "shape"), for pages whose place in the b-tree was lost with the page above them.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analysis/read/sqlite_pages.h"

namespace gmt::analysis::salvage {

// A table of the salvaged database, as the rows read from the damaged file must fit it.
struct Table {
  std::string name;
  uint32_t root = 0;         // its root page in the damaged file; 0 when the file's schema was lost
  bool single_page = false;  // its root page is a leaf: the table has no other page (never an orphan's owner)
  bool without_rowid = false;
  int ipk = -1;  // the INTEGER PRIMARY KEY column (stored as NULL in a record: the rowid is its value), -1: none
  std::vector<char> affinity;  // per column: 'i' integer, 't' text, '?' anything
  std::vector<bool> not_null;
  std::vector<std::string> columns;
  uint64_t rows = 0;                        // rows put into the salvaged database
  std::map<size_t, sqlite3_stmt*> inserts;  // by the number of values a row has
};

class SalvageDb {
 public:
  // Creates the database at `path` (an empty private file) with the trace's application_id and user_version.
  SalvageDb(const std::string& path, int64_t application_id, int64_t user_version);
  ~SalvageDb();
  SalvageDb(const SalvageDb&) = delete;
  SalvageDb& operator=(const SalvageDb&) = delete;

  // Creates a table from the trace's own CREATE statement when it is one of our tables and SQLite accepts it
  // (an older trace's columns), else from the current schema's; false for a name that is none of our tables.
  bool add_table(const std::string& name, const std::string& trace_sql, uint32_t root);
  // Every table of the current schema not added yet (the trace's schema could not be read).
  void add_current_schema();
  // The current schema's views and triggers (v12's `events` over event_rows and event_types), once the tables
  // they read are there; none for an older trace, whose events is a table.
  void add_views();

  std::vector<Table>& tables() { return tables_; }
  Table* find(const std::string& name);

  // Whether `row` can be a row of `table`: its column count and each value's type (NULL where the column allows
  // it, the INTEGER PRIMARY KEY always NULL). `exact`: the column count must match (rows of a page of unknown
  // table); else fewer columns are allowed (columns added after the row was written take their defaults).
  static bool fits(const Table& table, const sqlite_file::Row& row, bool exact);
  // INSERT OR IGNORE: the first row read for a key wins (rows reached from the b-tree come before orphans').
  bool insert(Table& table, const sqlite_file::Row& row);
  void commit();

 private:
  void exec(const char* sql);
  bool describe(Table& table, const std::string& sql);
  sqlite3_stmt* insert_statement(Table& table, size_t values);

  sqlite3* db_ = nullptr;
  // Before current_sql_: the constructor fills both from one read of the schema.
  std::vector<std::string> current_views_;          // the current schema's CREATE VIEW and TRIGGER statements
  std::map<std::string, std::string> current_sql_;  // its CREATE TABLE statements, by name
  std::vector<Table> tables_;
};

}  // namespace gmt::analysis::salvage
