// Turns an empty SQLite database into an empty trace of the current schema version. The one place that
// writes the pragmas, tables and lookup tables; used by the in-process writer, by the CLI (for processes that
// never touched CUDA) and by tests that build traces by hand.
#pragma once

#include <sqlite3.h>

#include <string>

namespace gmt::schema {

// Sets WAL mode, application_id and user_version, creates every table and fills the lookup tables, in one
// transaction. Returns false and sets `error` on failure.
bool initialize_trace(sqlite3* db, std::string& error);

}  // namespace gmt::schema
