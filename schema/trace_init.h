// How a trace file comes to be: the one place that creates the file, writes the pragmas, tables and lookup tables,
// and sets meta keys. Used by the in-process writer (recorder/trace_writer.cpp), by `run` for the stand-in trace of
// a process that never touched CUDA (cli/post_run.cpp), by the symbolizer and by tests that build traces by hand.
#pragma once

#include <sqlite3.h>

#include <string>
#include <string_view>

namespace gmt::schema {

// Creates the file `path` for a new trace, exclusively (an existing file is never touched) and readable by its
// owner only (0600), and makes it an empty trace (initialize_trace). Returns the open read-write connection, which
// the caller closes, or nullptr with `error` set: "cannot create '<path>': <reason>", "cannot open '<path>':
// <reason>", or initialize_trace's message.
sqlite3* create_trace_file(const std::string& path, std::string& error);

// Turns an empty SQLite database into an empty trace of the current schema version: sets WAL mode, application_id
// and user_version, creates every table and fills the lookup tables, in one transaction. Returns false and sets
// `error` on failure.
bool initialize_trace(sqlite3* db, std::string& error);

// The statement that sets one meta key (a key set again takes the new value), for a writer that keeps it prepared.
inline constexpr const char* kSetMetaSql = "INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)";

// Sets one meta key through a statement prepared from kSetMetaSql, and resets it. False on an SQLite error
// (sqlite3_errmsg says which).
bool set_meta(sqlite3_stmt* set_meta_statement, std::string_view key, std::string_view value);
// The same, preparing the statement: for the few keys a one-off writer sets.
bool set_meta(sqlite3* db, std::string_view key, std::string_view value);

}  // namespace gmt::schema
