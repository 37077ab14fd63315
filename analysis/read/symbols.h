// What symbolization (symbolizer.h) reads from a trace and writes back: the modules table, the pcs still without a
// symbols row, and the symbols rows themselves, in one transaction. The symbolizer's only SQL.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/read/trace_file.h"

namespace gmt::analysis {

struct ModuleRow {
  int64_t id = 0;
  std::string path;  // "" when NULL
  uint64_t base = 0;
  uint64_t size = 0;
  std::string build_id;  // as stored ("" when NULL); the symbolizer compares it in lower case
};

// Every row of the modules table, in table order.
std::vector<ModuleRow> read_modules(const TraceFile& trace);

// The distinct pcs of native frames that have no symbols row yet, sorted, so that one module's pcs come together
// (its files and DWARF stay hot in the cache). Python frames (v5) have no pc to symbolize.
std::vector<uint64_t> pending_pcs(const TraceFile& trace);

// The symbolizer's write transaction. Refuses a trace opened read-only; BEGIN IMMEDIATE takes the write lock
// before reading, so the set of pending pcs cannot change under us. Rolls back unless committed, so that an
// exception (SQLite, or thrown by the progress callback to cancel) leaves the trace as it was.
class SymbolsTransaction {
 public:
  explicit SymbolsTransaction(const TraceFile& trace);
  ~SymbolsTransaction();
  SymbolsTransaction(const SymbolsTransaction&) = delete;
  SymbolsTransaction& operator=(const SymbolsTransaction&) = delete;
  // Sets meta 'symbolized' = '1' and commits.
  void commit_symbolized();

 private:
  const TraceFile& trace_;
  bool committed_ = false;
};

// Writes symbols rows (INSERT OR REPLACE). Statement (trace_file.h) is for reading and words its errors that way;
// writes get their own message and check every bind.
class SymbolWriter {
 public:
  explicit SymbolWriter(const TraceFile& trace);
  ~SymbolWriter();
  SymbolWriter(const SymbolWriter&) = delete;
  SymbolWriter& operator=(const SymbolWriter&) = delete;

  void write(uint64_t pc, const std::optional<std::string>& function, const std::optional<std::string>& file,
             std::optional<int64_t> line, std::optional<int64_t> module_id);

 private:
  void bind(int index, std::optional<int64_t> value);
  void bind(int index, const std::optional<std::string>& value);
  void check(int rc);
  [[noreturn]] void fail();
  const TraceFile& trace_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace gmt::analysis
