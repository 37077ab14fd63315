// libFuzzer target: well-formed traces with absurd contents. Byte-level mutations of an SQLite file mostly
// produce files SQLite itself rejects as corrupt (fuzz_trace_report.cpp covers those); this target builds
// a valid trace of the current schema and fills every table, whatever the schema holds today, with values
// the fuzzer picks: negative and huge sizes, frees of unknown addresses, stack ids that do not exist, times
// that run backwards, kinds and codes out of range, text where numbers belong, invalid UTF-8, NULLs, an
// older schema version, an optional table missing. Then the report path runs as in fuzz_trace_report.cpp.
#include <fuzzer/FuzzedDataProvider.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "analysis/model/analyze.h"
#include "analysis/model/report.h"
#include "analysis/read/trace_file.h"
#include "analysis/render/render.h"
#include "schema/trace_init.h"
#include "schema/trace_schema.h"

namespace {

const char* const kMetaKeys[] = {gmt::schema::meta::kPid,
                                 gmt::schema::meta::kParentPid,
                                 gmt::schema::meta::kCommandLine,
                                 gmt::schema::meta::kHostname,
                                 gmt::schema::meta::kStartUnixNs,
                                 gmt::schema::meta::kStartMonotonicNs,
                                 gmt::schema::meta::kEndMonotonicNs,
                                 gmt::schema::meta::kComplete,
                                 gmt::schema::meta::kSimulated,
                                 gmt::schema::meta::kBackend,
                                 gmt::schema::meta::kBackendNote,
                                 gmt::schema::meta::kToolVersion,
                                 gmt::schema::meta::kDroppedEvents,
                                 gmt::schema::meta::kSymbolized,
                                 gmt::schema::meta::kBackendReason,
                                 gmt::schema::meta::kVerifyBackend,
                                 gmt::schema::meta::kVerifyUnavailable};

// Values the backend keys really take, so that run --verify's cross-check (analysis/model/verify.cpp) runs on damaged
// events: a random text would almost never name a backend.
const char* const kBackendNames[] = {gmt::schema::backend_names::kHooks, gmt::schema::backend_names::kCupti,
                                     gmt::schema::backend_names::kRuntime};

bool names_a_backend(const char* key) {
  return key == gmt::schema::meta::kBackend || key == gmt::schema::meta::kVerifyBackend;
}

// Values from small palettes, so that addresses match between allocations and frees, kinds land in and
// just outside their ranges, and stack ids sometimes exist.
int64_t pick_int(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 6)) {
    case 0: return in.ConsumeIntegralInRange<int64_t>(-2, 20);
    case 1: return in.ConsumeIntegralInRange<int64_t>(0, 64) * 4096;
    case 2: return in.ConsumeIntegral<int64_t>();
    case 3: return std::numeric_limits<int64_t>::max() - in.ConsumeIntegralInRange<int64_t>(0, 2);
    case 4: return std::numeric_limits<int64_t>::min() + in.ConsumeIntegralInRange<int64_t>(0, 2);
    case 5: return in.ConsumeIntegralInRange<int64_t>(-1, 50);
    default: return 1'000'000'000 + in.ConsumeIntegralInRange<int64_t>(0, 100'000'000'000);  // times
  }
}

void bind_value(FuzzedDataProvider& in, sqlite3_stmt* stmt, int index) {
  switch (in.ConsumeIntegralInRange<int>(0, 9)) {
    case 0: sqlite3_bind_null(stmt, index); break;
    case 1: {
      std::string text = in.ConsumeRandomLengthString(64);  // any bytes: invalid UTF-8 included
      sqlite3_bind_text(stmt, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
      break;
    }
    case 2: sqlite3_bind_double(stmt, index, in.ConsumeFloatingPoint<double>()); break;
    default: sqlite3_bind_int64(stmt, index, pick_int(in)); break;
  }
}

bool exec(sqlite3* db, const std::string& sql) {
  return sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK;
}

std::string quoted(const std::string& name) {
  std::string out = "\"";
  for (char c : name) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

void fill_table(FuzzedDataProvider& in, sqlite3* db, const std::string& table) {
  std::vector<std::string> columns;
  sqlite3_stmt* info = nullptr;
  std::string pragma = "PRAGMA table_info(" + quoted(table) + ")";
  if (sqlite3_prepare_v2(db, pragma.c_str(), -1, &info, nullptr) != SQLITE_OK) return;
  while (sqlite3_step(info) == SQLITE_ROW)
    columns.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(info, 1)));
  sqlite3_finalize(info);
  if (columns.empty()) return;
  std::string sql = "INSERT OR IGNORE INTO " + quoted(table) + "(";
  std::string values;
  for (size_t i = 0; i < columns.size(); ++i) {
    sql += (i ? "," : "") + quoted(columns[i]);
    values += (i ? ",?" : "?") + std::to_string(i + 1);
  }
  sql += ") VALUES (" + values + ")";
  sqlite3_stmt* insert = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &insert, nullptr) != SQLITE_OK) return;
  int rows = in.ConsumeIntegralInRange<int>(0, table == "events" ? 200 : 24);
  for (int r = 0; r < rows && in.remaining_bytes() > 0; ++r) {
    const char* key = nullptr;  // the meta key of this row, when one of ours was picked
    for (size_t i = 0; i < columns.size(); ++i) {
      if (table == "meta" && columns[i] == "key" && in.ConsumeBool()) {
        key = in.PickValueInArray(kMetaKeys);
        sqlite3_bind_text(insert, static_cast<int>(i + 1), key, -1, SQLITE_STATIC);
      } else if (table == "meta" && columns[i] == "value" && key && names_a_backend(key) && in.ConsumeBool()) {
        sqlite3_bind_text(insert, static_cast<int>(i + 1), in.PickValueInArray(kBackendNames), -1, SQLITE_STATIC);
      } else {
        bind_value(in, insert, static_cast<int>(i + 1));
      }
    }
    sqlite3_step(insert);
    sqlite3_reset(insert);
    sqlite3_clear_bindings(insert);
  }
  sqlite3_finalize(insert);
}

std::string trace_path() {
  const char* tmp = getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/gmt-fuzz-values-" + std::to_string(getpid()) + ".db";
}

void remove_trace(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) unlink((path + suffix).c_str());
}

bool build_trace(FuzzedDataProvider& in, const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return false;
  }
  std::string error;
  bool ok = gmt::schema::initialize_trace(db, error);
  exec(db, "PRAGMA journal_mode=DELETE");  // one self-contained file
  exec(db, "PRAGMA synchronous=OFF");      // a scratch file: no fsync
  std::vector<std::string> tables;
  sqlite3_stmt* list = nullptr;
  sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name", -1, &list, nullptr);
  while (sqlite3_step(list) == SQLITE_ROW)
    tables.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(list, 0)));
  sqlite3_finalize(list);
  exec(db, "BEGIN");
  for (const auto& table : tables) {
    if (table == "event_kinds" || table == "memory_kinds" || table == "apis" || table == "sources") continue;
    fill_table(in, db, table);
  }
  exec(db, "COMMIT");
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0 && !tables.empty()) {  // a table an older writer lacked
    exec(db, "DROP TABLE " + quoted(tables[in.ConsumeIntegralInRange<size_t>(0, tables.size() - 1)]));
  }
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0) {
    exec(db, "PRAGMA user_version=" + std::to_string(in.ConsumeIntegralInRange<int>(0, gmt::schema::kSchemaVersion)));
  }
  sqlite3_close(db);
  return ok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = trace_path();
  FuzzedDataProvider in(data, size);
  remove_trace(path);
  if (!build_trace(in, path)) return 0;
  try {
    auto trace = gmt::analysis::TraceFile::open(path);
    gmt::analysis::Report report = gmt::analysis::analyze_trace(trace);
    gmt::analysis::RenderOptions options;
    options.top = 5;
    std::string text = gmt::analysis::render_text(report, options);
    std::string json = gmt::analysis::render_json(report, options);
    if (text.empty() || json.empty()) __builtin_trap();
  } catch (const gmt::analysis::TraceError&) {
    // a clear message for the user: the right answer for a trace that cannot be read
  }
  remove_trace(path);
  return 0;
}
