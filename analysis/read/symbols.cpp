#include "analysis/read/symbols.h"

#include <fmt/core.h>

#include "schema/trace_init.h"
#include "schema/trace_schema.h"

namespace gmt::analysis {

std::vector<ModuleRow> read_modules(const TraceFile& trace) {
  Statement query(trace, "SELECT id, path, base, size, build_id FROM modules");
  std::vector<ModuleRow> modules;
  while (query.step()) {
    ModuleRow module;
    module.id = query.column_int(0);
    module.path = query.column_text(1).value_or("");
    module.base = static_cast<uint64_t>(query.column_int(2));
    module.size = static_cast<uint64_t>(query.column_int(3));
    module.build_id = query.column_text(4).value_or("");
    modules.push_back(std::move(module));
  }
  return modules;
}

std::vector<uint64_t> pending_pcs(const TraceFile& trace) {
  Statement query(trace,
                  trace.schema_version() >= 5
                      ? "SELECT DISTINCT pc FROM stack_frames WHERE python_frame_id = 0 AND pc NOT IN "
                        "(SELECT pc FROM symbols) ORDER BY pc"
                      : "SELECT DISTINCT pc FROM stack_frames WHERE pc NOT IN (SELECT pc FROM symbols) ORDER BY pc");
  std::vector<uint64_t> pcs;
  while (query.step()) pcs.push_back(static_cast<uint64_t>(query.column_int(0)));
  return pcs;
}

SymbolsTransaction::SymbolsTransaction(const TraceFile& trace) : trace_(trace) {
  if (sqlite3_db_readonly(trace.db(), "main") != 0) {
    throw TraceError(fmt::format("cannot symbolize trace '{}': it was opened read-only", trace.path()));
  }
  trace_.exec("BEGIN IMMEDIATE");
}

SymbolsTransaction::~SymbolsTransaction() {
  if (!committed_) sqlite3_exec(trace_.db(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void SymbolsTransaction::commit_symbolized() {
  if (!schema::set_meta(trace_.db(), schema::meta::kSymbolized, "1")) {
    throw TraceError(fmt::format("cannot write symbols to trace '{}': {}", trace_.path(), sqlite3_errmsg(trace_.db())));
  }
  trace_.exec("COMMIT");
  committed_ = true;
}

SymbolWriter::SymbolWriter(const TraceFile& trace) : trace_(trace) {
  const char* sql = "INSERT OR REPLACE INTO symbols(pc, function, file, line, module_id) VALUES (?1, ?2, ?3, ?4, ?5)";
  if (sqlite3_prepare_v2(trace.db(), sql, -1, &stmt_, nullptr) != SQLITE_OK) fail();
}

SymbolWriter::~SymbolWriter() { sqlite3_finalize(stmt_); }

void SymbolWriter::write(uint64_t pc, const std::optional<std::string>& function,
                         const std::optional<std::string>& file, std::optional<int64_t> line,
                         std::optional<int64_t> module_id) {
  bind(1, static_cast<int64_t>(pc));
  bind(2, function);
  bind(3, file);
  bind(4, line);
  bind(5, module_id);
  if (sqlite3_step(stmt_) != SQLITE_DONE) fail();
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

void SymbolWriter::bind(int index, std::optional<int64_t> value) {
  check(value ? sqlite3_bind_int64(stmt_, index, *value) : sqlite3_bind_null(stmt_, index));
}

void SymbolWriter::bind(int index, const std::optional<std::string>& value) {
  check(value ? sqlite3_bind_text(stmt_, index, value->data(), static_cast<int>(value->size()), SQLITE_TRANSIENT)
              : sqlite3_bind_null(stmt_, index));
}

void SymbolWriter::check(int rc) {
  if (rc != SQLITE_OK) fail();
}

void SymbolWriter::fail() {
  throw TraceError(fmt::format("cannot write symbols to trace '{}': {}", trace_.path(), sqlite3_errmsg(trace_.db())));
}

}  // namespace gmt::analysis
