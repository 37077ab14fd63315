// Builds small trace files for tests with the real schema, so that tests read files exactly like the ones
// the recorder writes. Header-only: every *_test.cpp can include it.
//
//   TraceBuilder trace;                              // temp dir, schema, standard meta (complete, pid, ...)
//   int64_t stack = trace.stack({0x401000, 0x402000});
//   trace.alloc(10, 0x1000, 4096, stack);            // time (ns after start), address, size, stack
//   trace.free(20, 0x1000);
//   auto file = trace.open();                        // closes the writer, opens with TraceFile::open
#pragma once

#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/read/trace_file.h"
#include "schema/trace_schema.h"

namespace gmt::test_support {

struct TraceBuilderOptions {
  int32_t application_id = schema::kApplicationId;
  int user_version = schema::kSchemaVersion;
  bool create_schema = true;
  bool standard_meta = true;  // the meta a clean, finished, symbolized run writes
};

// One events row; the defaults are a device cudaMalloc on device 0 with no stack.
struct EventRow {
  int64_t time_ns = 0;  // relative to kStartNs
  schema::EventKind kind = schema::EventKind::Alloc;
  int64_t api = static_cast<int64_t>(schema::Api::cudaMalloc);
  int64_t memory_kind = static_cast<int64_t>(schema::MemoryKind::Device);
  int64_t device = 0;
  int64_t address = 0;
  int64_t size = 0;
  int64_t stack_id = 0;
  int64_t error = 0;
  int64_t handle = 0;  // VMM physical handle, or a pool
  int64_t thread_id = 1000;
  int64_t stream = 0;
  int64_t source = static_cast<int64_t>(schema::Source::RuntimeHook);
};

class TraceBuilder {
 public:
  static constexpr int64_t kStartNs = 1'000'000'000'000;  // meta start_monotonic_ns
  static constexpr int64_t kEndNs = kStartNs + 5'000'000'000;

  explicit TraceBuilder(TraceBuilderOptions options = {}) {
    std::string pattern = (std::filesystem::temp_directory_path() / "gmt-test-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    dir_ = pattern;
    path_ = (dir_ / "trace.db").string();
    if (sqlite3_open(path_.c_str(), &db_) != SQLITE_OK) throw std::runtime_error("cannot create " + path_);
    // A test file needs no durability: without fsyncs a test takes milliseconds instead of half a second.
    exec("PRAGMA synchronous = OFF");
    exec("PRAGMA journal_mode = MEMORY");
    exec("PRAGMA application_id = " + std::to_string(options.application_id));
    exec("PRAGMA user_version = " + std::to_string(options.user_version));
    if (!options.create_schema) return;
    exec(schema::kCreateSchemaSql);
    fill_lookup_tables();
    if (options.standard_meta) {
      meta(schema::meta::kPid, "4242");
      meta(schema::meta::kCommandLine, "./app --iterations 3");
      meta(schema::meta::kStartMonotonicNs, std::to_string(kStartNs));
      meta(schema::meta::kEndMonotonicNs, std::to_string(kEndNs));
      meta(schema::meta::kComplete, "1");
      meta(schema::meta::kSimulated, "0");
      meta(schema::meta::kBackend, schema::backend_names::kRuntime);
      meta(schema::meta::kDroppedEvents, "0");
      meta(schema::meta::kSymbolized, "1");
    }
  }

  ~TraceBuilder() {
    close();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  TraceBuilder(const TraceBuilder&) = delete;
  TraceBuilder& operator=(const TraceBuilder&) = delete;

  const std::string& path() const { return path_; }
  const std::filesystem::path& dir() const { return dir_; }

  void exec(const std::string& sql) {
    char* error = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
      std::string message = error ? error : "?";
      sqlite3_free(error);
      throw std::runtime_error("TraceBuilder: " + message + " in: " + sql);
    }
  }

  // Wraps many inserts in one transaction (thousands of rows in milliseconds instead of seconds).
  void begin() { exec("BEGIN"); }
  void commit() { exec("COMMIT"); }

  TraceBuilder& meta(const std::string& key, const std::string& value) {
    run("INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)", {}, {key, value});
    return *this;
  }
  TraceBuilder& remove_meta(const std::string& key) {
    run("DELETE FROM meta WHERE key = ?1", {}, {key});
    return *this;
  }

  int64_t event(const EventRow& row) {
    run("INSERT INTO events(time_ns, kind, api, source, memory_kind, thread_id, device, stream, address, "
        "size, stack_id, error, handle) VALUES (?1, ?2, ?3, ?13, ?4, ?11, ?5, ?12, ?6, ?7, ?8, ?9, ?10)",
        {kStartNs + row.time_ns, static_cast<int64_t>(row.kind), row.api, row.memory_kind, row.device, row.address,
         row.size, row.stack_id, row.error, row.handle, row.thread_id, row.stream, row.source});
    // The view's trigger inserts the row (schema v12): last_insert_rowid does not see inside a trigger.
    return scalar("SELECT max(id) FROM event_rows");
  }

  int64_t alloc(int64_t time_ns, int64_t address, int64_t size, int64_t stack_id = 0,
                schema::Api api = schema::Api::cudaMalloc, schema::MemoryKind kind = schema::MemoryKind::Device,
                int64_t device = 0) {
    return event({time_ns, schema::EventKind::Alloc, static_cast<int64_t>(api), static_cast<int64_t>(kind), device,
                  address, size, stack_id, 0});
  }

  int64_t free(int64_t time_ns, int64_t address, schema::Api api = schema::Api::cudaFree,
               schema::MemoryKind kind = schema::MemoryKind::Device) {
    return event(
        {time_ns, schema::EventKind::Free, static_cast<int64_t>(api), static_cast<int64_t>(kind), 0, address, 0, 0, 0});
  }

  // An AllocFailed event, plus its alloc_failures row when device_free is given.
  int64_t alloc_failed(int64_t time_ns, int64_t size, int64_t error, int64_t stack_id = 0,
                       std::optional<int64_t> device_free = std::nullopt,
                       std::optional<int64_t> device_total = std::nullopt, int64_t device = 0) {
    int64_t id = event({time_ns, schema::EventKind::AllocFailed, static_cast<int64_t>(schema::Api::cudaMalloc),
                        static_cast<int64_t>(schema::MemoryKind::Device), device, 0, size, stack_id, error});
    if (device_free || device_total) {
      sqlite3_stmt* stmt =
          prepare("INSERT INTO alloc_failures(event_id, device_free, device_total) VALUES (?1, ?2, ?3)");
      sqlite3_bind_int64(stmt, 1, id);
      bind_optional(stmt, 2, device_free);
      bind_optional(stmt, 3, device_total);
      step_and_finalize(stmt);
    }
    return id;
  }

  // A stack with these pcs, innermost first; returns its id (1, 2, ... unless given).
  int64_t stack(const std::vector<uint64_t>& pcs, std::optional<int64_t> id = std::nullopt) {
    int64_t stack_id = id.value_or(next_stack_id_);
    next_stack_id_ = std::max(next_stack_id_, stack_id + 1);
    run("INSERT INTO stacks(id, depth) VALUES (?1, ?2)", {stack_id, static_cast<int64_t>(pcs.size())});
    for (size_t level = 0; level < pcs.size(); ++level) {
      run("INSERT INTO stack_frames(stack_id, level, pc) VALUES (?1, ?2, ?3)",
          {stack_id, static_cast<int64_t>(level), static_cast<int64_t>(pcs[level])});
    }
    return stack_id;
  }

  // An NVTX range (schema v4): push/pop when depth >= 0, start/end when depth is -1; end nullopt = never
  // closed. Names and domains are interned into `strings`; domain "" is the default domain. Returns the id.
  int64_t range(const std::string& name, int64_t start_ns, std::optional<int64_t> end_ns, int64_t depth = 0,
                int64_t thread_id = 1000, const std::string& domain = "") {
    sqlite3_stmt* stmt =
        prepare("INSERT INTO ranges(thread_id, domain_id, name_id, start_ns, end_ns, depth, end_thread_id) "
                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    sqlite3_bind_int64(stmt, 1, thread_id);
    sqlite3_bind_int64(stmt, 2, domain.empty() ? 0 : string_id(domain));
    sqlite3_bind_int64(stmt, 3, string_id(name));
    sqlite3_bind_int64(stmt, 4, kStartNs + start_ns);
    bind_optional(stmt, 5, end_ns ? std::optional<int64_t>(kStartNs + *end_ns) : std::nullopt);
    sqlite3_bind_int64(stmt, 6, depth);
    bind_optional(stmt, 7, end_ns ? std::optional<int64_t>(thread_id) : std::nullopt);
    step_and_finalize(stmt);
    return sqlite3_last_insert_rowid(db_);
  }

  int64_t module(const std::string& path, uint64_t base, uint64_t size) {
    run("INSERT INTO modules(path, base, size) VALUES (?3, ?1, ?2)",
        {static_cast<int64_t>(base), static_cast<int64_t>(size)}, {path});
    return sqlite3_last_insert_rowid(db_);
  }

  // A symbols row; nullopt fields are stored as NULL.
  void symbol(uint64_t pc, std::optional<std::string> function, std::optional<std::string> file = std::nullopt,
              std::optional<int64_t> line = std::nullopt, std::optional<int64_t> module_id = std::nullopt) {
    sqlite3_stmt* stmt =
        prepare("INSERT INTO symbols(pc, function, file, line, module_id) VALUES (?1, ?2, ?3, ?4, ?5)");
    sqlite3_bind_int64(stmt, 1, static_cast<int64_t>(pc));
    bind_optional(stmt, 2, function);
    bind_optional(stmt, 3, file);
    bind_optional(stmt, 4, line);
    bind_optional(stmt, 5, module_id);
    step_and_finalize(stmt);
  }

  // Closes the writer; the file is complete on disk afterwards. Further calls to the builder are errors.
  void close() {
    if (db_) sqlite3_close(db_);
    db_ = nullptr;
  }

  analysis::TraceFile open() {
    close();
    return analysis::TraceFile::open(path_);
  }

 private:
  void fill_lookup_tables() {
    begin();
    for (int i = 1; i <= schema::kMaxEventKind; ++i)
      lookup("event_kinds", i, schema::to_string(static_cast<schema::EventKind>(i)));
    for (int i = 0; i <= schema::kMaxMemoryKind; ++i)
      lookup("memory_kinds", i, schema::to_string(static_cast<schema::MemoryKind>(i)));
    for (int i = 0; i <= schema::kMaxApi; ++i) lookup("apis", i, schema::to_string(static_cast<schema::Api>(i)));
    for (int i = 1; i <= schema::kMaxSource; ++i)
      lookup("sources", i, schema::to_string(static_cast<schema::Source>(i)));
    commit();
  }

  void lookup(const std::string& table, int id, std::string_view name) {
    run("INSERT INTO " + table + "(id, name) VALUES (?1, ?2)", {id}, {std::string(name)});
  }

  sqlite3_stmt* prepare(const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
      throw std::runtime_error(std::string("TraceBuilder: ") + sqlite3_errmsg(db_) + " in: " + sql);
    }
    return stmt;
  }

  void step_and_finalize(sqlite3_stmt* stmt) {
    int rc = sqlite3_step(stmt);
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) throw std::runtime_error(std::string("TraceBuilder: ") + sqlite3_errmsg(db_));
  }

  static void bind_optional(sqlite3_stmt* stmt, int index, const std::optional<int64_t>& value) {
    if (value)
      sqlite3_bind_int64(stmt, index, *value);
    else
      sqlite3_bind_null(stmt, index);
  }
  static void bind_optional(sqlite3_stmt* stmt, int index, const std::optional<std::string>& value) {
    if (value)
      sqlite3_bind_text(stmt, index, value->data(), static_cast<int>(value->size()), SQLITE_TRANSIENT);
    else
      sqlite3_bind_null(stmt, index);
  }

  // Integers bind to ?1..?n, then texts to the following indexes.
  void run(const std::string& sql, const std::vector<int64_t>& ints, const std::vector<std::string>& texts = {}) {
    sqlite3_stmt* stmt = prepare(sql);
    int index = 1;
    for (int64_t value : ints) sqlite3_bind_int64(stmt, index++, value);
    for (const std::string& text : texts) {
      sqlite3_bind_text(stmt, index++, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
    }
    step_and_finalize(stmt);
  }

  int64_t scalar(const std::string& sql) {
    sqlite3_stmt* query = prepare(sql);
    const int64_t value = sqlite3_step(query) == SQLITE_ROW ? sqlite3_column_int64(query, 0) : 0;
    sqlite3_finalize(query);
    return value;
  }

  int64_t string_id(const std::string& text) {
    sqlite3_stmt* find = prepare("SELECT id FROM strings WHERE text = ?1");
    sqlite3_bind_text(find, 1, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
    if (sqlite3_step(find) == SQLITE_ROW) {
      int64_t id = sqlite3_column_int64(find, 0);
      sqlite3_finalize(find);
      return id;
    }
    sqlite3_finalize(find);
    run("INSERT INTO strings(text) VALUES (?1)", {}, {text});
    return sqlite3_last_insert_rowid(db_);
  }

  std::filesystem::path dir_;
  std::string path_;
  sqlite3* db_ = nullptr;
  int64_t next_stack_id_ = 1;
};

}  // namespace gmt::test_support
