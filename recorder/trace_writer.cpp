#include "recorder/trace_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "schema/trace_init.h"
#include "schema/trace_schema.h"

namespace gmt::recorder {

bool TraceWriter::create(const std::string& path, std::string& error) {
  // O_EXCL: an existing file is never overwritten (the CLI removes it first when asked to with --force).
  int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) {
    error = "cannot create trace '" + path + "': " + std::strerror(errno);
    return false;
  }
  ::close(fd);
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    error = "cannot open trace '" + path + "': " + (db_ ? sqlite3_errmsg(db_) : "out of memory");
    sqlite3_close(db_);
    db_ = nullptr;
    return false;
  }
  if (!schema::initialize_trace(db_, last_error_)) {
    error = "cannot initialize trace '" + path + "': " + last_error_;
    close();
    return false;
  }
  bool ok = prepare(&insert_event_,
                    "INSERT INTO events(time_ns, kind, api, source, memory_kind, thread_id, device, stream, "
                    "address, size, stack_id, error, handle, context) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14)") &&
            prepare(&insert_failure_,
                    "INSERT INTO alloc_failures(event_id, device_free, device_total) VALUES (?1, ?2, ?3)") &&
            prepare(&insert_stack_, "INSERT INTO stacks(id, depth) VALUES (?1, ?2)") &&
            prepare(&insert_frame_, "INSERT INTO stack_frames(stack_id, level, pc) VALUES (?1, ?2, ?3)") &&
            prepare(&insert_module_, "INSERT INTO modules(path, base, size, build_id) VALUES (?1, ?2, ?3, ?4)") &&
            prepare(&upsert_meta_, "INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)") &&
            prepare(&insert_pool_usage_, "INSERT INTO pool_usage(time_ns, pool, device, reserved_bytes, used_bytes) "
                                         "VALUES (?1, ?2, ?3, ?4, ?5)");
  if (!ok) {
    error = "cannot initialize trace '" + path + "': " + last_error_;
    close();
    return false;
  }
  return true;
}

void TraceWriter::set_meta(const char* key, const std::string& value) {
  if (!db_) return;
  sqlite3_bind_text(upsert_meta_, 1, key, -1, SQLITE_STATIC);
  sqlite3_bind_text(upsert_meta_, 2, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  step_and_reset(upsert_meta_);
}

bool TraceWriter::write_batch(const std::vector<NewStack>& stacks, const EventRecord* const* event_runs,
                              const size_t* run_lengths, size_t runs, const std::vector<Module>& modules) {
  if (!db_) return false;
  if (!exec("BEGIN")) return false;
  bool ok = true;
  for (const auto& m : modules) {
    sqlite3_bind_text(insert_module_, 1, m.path.data(), static_cast<int>(m.path.size()), SQLITE_TRANSIENT);
    sqlite3_bind_int64(insert_module_, 2, static_cast<sqlite3_int64>(m.base));
    sqlite3_bind_int64(insert_module_, 3, static_cast<sqlite3_int64>(m.size));
    if (m.build_id.empty()) {
      sqlite3_bind_null(insert_module_, 4);
    } else {
      sqlite3_bind_text(insert_module_, 4, m.build_id.data(), static_cast<int>(m.build_id.size()), SQLITE_TRANSIENT);
    }
    ok &= step_and_reset(insert_module_);
  }
  for (const auto& s : stacks) {
    sqlite3_bind_int64(insert_stack_, 1, s.id);
    sqlite3_bind_int64(insert_stack_, 2, static_cast<sqlite3_int64>(s.pcs.size()));
    ok &= step_and_reset(insert_stack_);
    for (size_t level = 0; level < s.pcs.size(); ++level) {
      sqlite3_bind_int64(insert_frame_, 1, s.id);
      sqlite3_bind_int64(insert_frame_, 2, static_cast<sqlite3_int64>(level));
      sqlite3_bind_int64(insert_frame_, 3, static_cast<sqlite3_int64>(s.pcs[level]));
      ok &= step_and_reset(insert_frame_);
    }
  }
  for (size_t r = 0; r < runs; ++r) {
    for (size_t i = 0; i < run_lengths[r]; ++i) {
      const EventRecord& e = event_runs[r][i];
      if (e.kind == schema::EventKind::PoolUsage) {
        sqlite3_stmt* p = insert_pool_usage_;
        sqlite3_bind_int64(p, 1, static_cast<sqlite3_int64>(e.time_ns));
        sqlite3_bind_int64(p, 2, static_cast<sqlite3_int64>(e.address));
        sqlite3_bind_int(p, 3, e.device);
        sqlite3_bind_int64(p, 4, static_cast<sqlite3_int64>(e.size));
        sqlite3_bind_int64(p, 5, static_cast<sqlite3_int64>(e.handle));
        ok &= step_and_reset(p);
        continue;
      }
      sqlite3_stmt* s = insert_event_;
      sqlite3_bind_int64(s, 1, static_cast<sqlite3_int64>(e.time_ns));
      sqlite3_bind_int(s, 2, static_cast<int>(e.kind));
      sqlite3_bind_int(s, 3, static_cast<int>(e.api));
      sqlite3_bind_int(s, 4, static_cast<int>(e.source));
      sqlite3_bind_int(s, 5, static_cast<int>(e.memory_kind));
      sqlite3_bind_int64(s, 6, e.thread_id);
      sqlite3_bind_int(s, 7, e.device);
      sqlite3_bind_int64(s, 8, static_cast<sqlite3_int64>(e.stream));
      sqlite3_bind_int64(s, 9, static_cast<sqlite3_int64>(e.address));
      sqlite3_bind_int64(s, 10, static_cast<sqlite3_int64>(e.size));
      sqlite3_bind_int64(s, 11, e.stack_id);
      sqlite3_bind_int(s, 12, e.error);
      sqlite3_bind_int64(s, 13, static_cast<sqlite3_int64>(e.handle));
      sqlite3_bind_int64(s, 14, static_cast<sqlite3_int64>(e.context));
      ok &= step_and_reset(s);
      if (e.kind == schema::EventKind::AllocFailed) {
        sqlite3_bind_int64(insert_failure_, 1, sqlite3_last_insert_rowid(db_));
        if (e.has_memory_info) {
          sqlite3_bind_int64(insert_failure_, 2, static_cast<sqlite3_int64>(e.device_free));
          sqlite3_bind_int64(insert_failure_, 3, static_cast<sqlite3_int64>(e.device_total));
        } else {
          sqlite3_bind_null(insert_failure_, 2);
          sqlite3_bind_null(insert_failure_, 3);
        }
        ok &= step_and_reset(insert_failure_);
      }
    }
  }
  ok &= exec("COMMIT");
  return ok;
}

void TraceWriter::close() {
  for (sqlite3_stmt* s : {insert_event_, insert_failure_, insert_stack_, insert_frame_, insert_module_, upsert_meta_,
                          insert_pool_usage_}) {
    sqlite3_finalize(s);
  }
  insert_event_ = insert_failure_ = insert_stack_ = insert_frame_ = insert_module_ = upsert_meta_ = nullptr;
  insert_pool_usage_ = nullptr;
  sqlite3_close(db_);
  db_ = nullptr;
}

bool TraceWriter::exec(const char* sql) {
  char* message = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &message) == SQLITE_OK) return true;
  last_error_ = message ? message : sqlite3_errmsg(db_);
  sqlite3_free(message);
  return false;
}

bool TraceWriter::prepare(sqlite3_stmt** stmt, const char* sql) {
  if (sqlite3_prepare_v2(db_, sql, -1, stmt, nullptr) == SQLITE_OK) return true;
  last_error_ = sqlite3_errmsg(db_);
  return false;
}

bool TraceWriter::step_and_reset(sqlite3_stmt* stmt) {
  int rc = sqlite3_step(stmt);
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  if (rc == SQLITE_DONE || rc == SQLITE_ROW) return true;
  last_error_ = sqlite3_errmsg(db_);
  return false;
}

}  // namespace gmt::recorder
