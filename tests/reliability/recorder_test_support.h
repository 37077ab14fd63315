// What the programs that link the recorder's objects directly (recorder_stress, recorder_order) share: checks that
// count failures, one-value queries of the trace, and an event recorded as a hook would record it.
#pragma once

#include <sqlite3.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "recorder/guard.h"
#include "recorder/recorder.h"
#include "recorder/settings.h"
#include "schema/environment.h"

namespace gmt_test {

inline int g_failures = 0;

inline void expect_eq(const char* what, int64_t got, int64_t want) {
  if (got == want) return;
  std::fprintf(stderr, "FAIL %s: got %lld, want %lld\n", what, static_cast<long long>(got),
               static_cast<long long>(want));
  ++g_failures;
}

inline int64_t query_int(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  int64_t value = -1;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW) {
      value = sqlite3_column_int64(stmt, 0);
    } else {
      std::fprintf(stderr, "query failed: %s: %s\n", sql, sqlite3_errmsg(db));
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  return value;
}

// An allocation or free of `device` (0 unless given), stamped now (or at `time_ns`), as a hook records it.
inline void record_one(gmt::schema::EventKind kind, uint64_t address, uint64_t size, bool take_stack,
                       uint64_t time_ns = 0, int16_t device = 0) {
  gmt::recorder::HookScope scope;  // as a hook would
  if (!scope.active()) return;
  gmt::recorder::EventRecord e;
  e.time_ns = time_ns != 0 ? time_ns : gmt::recorder::now_ns();
  e.thread_id = gmt::recorder::current_thread_id();
  e.kind = kind;
  e.api = kind == gmt::schema::EventKind::Alloc ? gmt::schema::Api::cudaMalloc : gmt::schema::Api::cudaFree;
  e.memory_kind = gmt::schema::MemoryKind::Device;
  e.device = device;
  e.call.address = address;
  e.call.size = size;
  gmt::recorder::record(e, take_stack);
}

inline void use_trace(const std::string& path) {
  unlink(path.c_str());
  setenv(gmt::schema::env::kOutput, path.c_str(), 1);
  unsetenv(gmt::schema::env::kRootPid);
  gmt::recorder::load_settings_from_environment();
}

}  // namespace gmt_test
