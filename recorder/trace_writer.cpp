#include "recorder/trace_writer.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_NOREPLACE
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <string>

#include "recorder/python_frame_table.h"
#include "recorder/strings.h"
#include "schema/trace_init.h"
#include "schema/trace_schema.h"

namespace gmt::recorder {
namespace {

WriterObserver* g_observer = nullptr;

// Removes a trace this process made and could not finish, with the WAL and shared-memory files beside it.
void remove_trace_files(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm"}) ::unlink((path + suffix).c_str());
}

// Builds an empty trace of the current schema at `temporary` and closes it, its WAL checkpointed into the file and
// truncated first. The close's own checkpoint hides its failure (the WAL is then kept beside the file): on a disk
// too full for it, the file alone would be half a database, and renamed into place it reads as "malformed".
bool build_empty_trace(const std::string& temporary, std::string& error) {
  sqlite3* db = schema::create_trace_file(temporary, error);
  if (!db) return false;
  // No fsync for the empty file: the checkpoint would otherwise sync it twice while the app waits for its first
  // flush. The trace's own connection syncs as docs/reliability.md says.
  sqlite3_exec(db, "PRAGMA synchronous=OFF", nullptr, nullptr, nullptr);
  if (sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr) != SQLITE_OK) {
    error = sqlite3_errmsg(db);
    sqlite3_close(db);
    return false;
  }
  if (sqlite3_close(db) != SQLITE_OK) {
    error = "cannot close '" + temporary + "'";
    return false;
  }
  return true;
}

// Gives `temporary` the name `path` unless `path` exists: atomically, so that no one ever sees the name
// without a complete file behind it, and an existing file is never replaced.
bool move_into_place(const std::string& temporary, const std::string& path, std::string& error) {
  if (::renameat2(AT_FDCWD, temporary.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) == 0) return true;
  if (errno == EINVAL || errno == ENOSYS) {  // a file system without RENAME_NOREPLACE: a hard link does it
    if (::link(temporary.c_str(), path.c_str()) == 0) {
      ::unlink(temporary.c_str());
      return true;
    }
  }
  error = "cannot create trace '" + path + "': " + std::strerror(errno);
  return false;
}

constexpr int kEventColumns = 9;

// "INSERT INTO event_rows(...) VALUES (?,...),(?,...)..." for `rows` rows of kEventColumns parameters each.
std::string insert_events_sql(size_t rows) {
  std::string sql =
      "INSERT INTO event_rows(time_ns, type, thread_id, stream, address, size, stack_id, error, handle) VALUES ";
  for (size_t row = 0; row < rows; ++row) {
    sql += row == 0 ? "(" : ",(";
    for (int column = 0; column < kEventColumns; ++column) sql += column == 0 ? "?" : ",?";
    sql += ")";
  }
  return sql;
}

// Binds one event_rows row (an event with a CallPayload, of event_types id `type`), its parameters starting at
// `first` (1-based).
void bind_event(sqlite3_stmt* s, int first, const EventRecord& e, int64_t type) {
  const CallPayload& call = e.call;
  sqlite3_bind_int64(s, first + 0, static_cast<sqlite3_int64>(e.time_ns));
  sqlite3_bind_int64(s, first + 1, type);
  sqlite3_bind_int64(s, first + 2, e.thread_id);
  sqlite3_bind_int64(s, first + 3, static_cast<sqlite3_int64>(call.stream));
  sqlite3_bind_int64(s, first + 4, static_cast<sqlite3_int64>(call.address));
  sqlite3_bind_int64(s, first + 5, static_cast<sqlite3_int64>(call.size));
  sqlite3_bind_int64(s, first + 6, e.stack_id);
  sqlite3_bind_int(s, first + 7, call.error);
  sqlite3_bind_int64(s, first + 8, static_cast<sqlite3_int64>(call.handle));
}

}  // namespace

void set_writer_observer(WriterObserver* observer) { g_observer = observer; }

bool TraceWriter::create(const std::string& path, std::string& error) {
  if (g_observer) g_observer->on_create_begin();
  bool created = create_file(path, error);
  if (g_observer) g_observer->on_create_end();
  return created;
}

bool TraceWriter::create_file(const std::string& path, std::string& error) {
  // The trace appears under its name only once its schema is committed: it is built under a temporary name
  // next to it and moved into place. A process that dies meanwhile (an app whose own signal handler calls
  // _exit right at start, seen on the H200) leaves no trace file rather than one without tables; at worst a
  // stray "<trace>.init-<pid>". An existing trace is never overwritten (the CLI removes it first when asked
  // to with --force).
  std::string temporary = path + ".init-" + std::to_string(::getpid());
  remove_trace_files(temporary);  // left by an earlier process with this pid that died in the same place
  std::string build_error;
  if (!build_empty_trace(temporary, build_error)) {
    remove_trace_files(temporary);
    error = "cannot create trace '" + path + "': " + build_error;
    return false;
  }
  if (!move_into_place(temporary, path, error)) {
    remove_trace_files(temporary);
    return false;
  }
  // NOMUTEX: this connection is used by one thread at a time (the recorder's write lock), so SQLite's own
  // per-call connection mutex is pure cost; measured, it was a third of the writer's time per event.
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
    error = "cannot open trace '" + path + "': " + (db_ ? sqlite3_errmsg(db_) : "out of memory");
    sqlite3_close(db_);
    db_ = nullptr;
    remove_trace_files(path);  // renamed into place by this process just now: no one else's
    return false;
  }
  bool ok =
      types_.open(db_, last_error_) && prepare(&insert_event_, insert_events_sql(1).c_str()) &&
      prepare(&insert_event_group_, insert_events_sql(kEventsPerInsert).c_str()) &&
      prepare(&insert_failure_,
              "INSERT INTO alloc_failures(event_id, device_free, device_total) VALUES (?1, ?2, ?3)") &&
      prepare(&insert_stack_, "INSERT INTO stacks(id, depth) VALUES (?1, ?2)") &&
      prepare(&insert_frame_, "INSERT INTO stack_frames(stack_id, level, pc, python_frame_id) "
                              "VALUES (?1, ?2, ?3, ?4)") &&
      prepare(&insert_python_frame_, "INSERT INTO python_frames(id, file_id, function_id, line) "
                                     "VALUES (?1, ?2, ?3, ?4)") &&
      prepare(&insert_module_, "INSERT INTO modules(path, base, size, build_id) VALUES (?1, ?2, ?3, ?4)") &&
      prepare(&upsert_meta_, schema::kSetMetaSql) &&
      prepare(&insert_pool_usage_, "INSERT INTO pool_usage(time_ns, pool, device, reserved_bytes, used_bytes) "
                                   "VALUES (?1, ?2, ?3, ?4, ?5)") &&
      prepare(&insert_allocator_sample_,
              "INSERT INTO allocator_stats(time_ns, device, allocator, trigger, in_use_bytes, reserved_bytes, "
              "inactive_split_bytes, alloc_retries, ooms, request_bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
              "?9, ?10)") &&
      prepare(&insert_string_, "INSERT INTO strings(id, text) VALUES (?1, ?2)") &&
      prepare(&insert_range_, "INSERT INTO ranges(id, thread_id, domain_id, name_id, start_ns, depth, end_ns, "
                              "end_thread_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)") &&
      prepare(&end_range_, "UPDATE ranges SET end_ns = ?2, end_thread_id = ?3 WHERE id = ?1 AND end_ns IS NULL") &&
      prepare(&insert_mark_, "INSERT INTO marks(time_ns, thread_id, domain_id, name_id) VALUES (?1, ?2, ?3, ?4)");
  if (!ok) {
    error = "cannot initialize trace '" + path + "': " + last_error_;
    close();
    remove_trace_files(path);
    return false;
  }
  disk_reserve_.hold_beside(path);  // best effort: without it a full disk may leave the stop reason unsaid
  return true;
}

bool TraceWriter::enable_aggregate(uint64_t t0_ns, uint64_t first_window_ns, std::string& error) {
  if (!db_) return false;
  auto aggregator = std::make_unique<Aggregator>();
  if (!exec("BEGIN")) return false;
  if (!aggregator->open(db_, &types_, t0_ns, first_window_ns, error) || !exec("COMMIT")) {
    exec("ROLLBACK");
    aggregator->close();
    if (error.empty()) error = last_error_;
    return false;
  }
  aggregator_ = std::move(aggregator);
  return true;
}

bool TraceWriter::checkpoint_now() {
  if (!db_ || !aggregator_) return true;
  if (!exec("BEGIN")) return false;
  if (!aggregator_->end_batch(/*force=*/true, 0)) {
    last_error_ = aggregator_->last_error();
    exec("ROLLBACK");
    return false;
  }
  return exec("COMMIT");
}

void TraceWriter::write_device(const DeviceDescription& device) {
  sqlite3_stmt* stmt = nullptr;
  if (!db_ || !prepare(&stmt, "INSERT OR REPLACE INTO devices(ordinal, name, uuid, total_bytes, pci_bus_id) "
                              "VALUES (?1, ?2, ?3, ?4, ?5)")) {
    return;
  }
  auto bind_text = [stmt](int index, const std::string& text) {
    if (!text.empty()) sqlite3_bind_text(stmt, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  };
  sqlite3_bind_int(stmt, 1, device.ordinal);
  bind_text(2, device.name);
  bind_text(3, device.uuid);
  if (device.total_bytes >= 0) sqlite3_bind_int64(stmt, 4, device.total_bytes);
  bind_text(5, device.pci_bus_id);
  step_and_reset(stmt);
  sqlite3_finalize(stmt);
}

void TraceWriter::set_meta(const char* key, const std::string& value) {
  if (!db_) return;
  if (!schema::set_meta(upsert_meta_, key, value)) last_error_ = sqlite3_errmsg(db_);
}

void TraceWriter::set_launch_meta(const schema::LaunchIdentity& launch) {
  if (!launch.rank.empty()) {
    set_meta(schema::meta::kRank, launch.rank);
    set_meta(schema::meta::kRankSource, launch.rank_source);
  }
  if (!launch.local_rank.empty()) {
    set_meta(schema::meta::kLocalRank, launch.local_rank);
    set_meta(schema::meta::kLocalRankSource, launch.local_rank_source);
  }
  if (!launch.world_size.empty()) set_meta(schema::meta::kWorldSize, launch.world_size);
}

bool TraceWriter::write_batch(const std::vector<NewStack>& stacks, const EventRecord* const* event_runs,
                              const size_t* run_lengths, size_t runs, const std::vector<unwind::Module>& modules) {
  if (!db_) return false;
  size_t events = 0;
  for (size_t r = 0; r < runs; ++r) events += run_lengths[r];
  bool observed = g_observer != nullptr;
  if (observed) g_observer->on_batch_begin(events);
  struct EndObserved {
    bool active;
    ~EndObserved() {
      if (active) g_observer->on_batch_end();
    }
  } end_observed{observed};
  if (!exec("BEGIN")) return false;
  // Counted before the strings are written: every string a python frame names was interned before it.
  uint32_t python_frames = python_frame_count();
  uint32_t strings_written = strings_written_;
  bool ok = write_new_strings(strings_written);
  ok &= write_new_python_frames(python_frames);
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
      bind_frame(level, s.pcs[level]);
      ok &= step_and_reset(insert_frame_);
    }
  }
  for (size_t r = 0; r < runs; ++r) {
    for (size_t i = 0; i < run_lengths[r]; ++i) {
      const EventRecord& e = event_runs[r][i];
      if (observed) g_observer->on_event(e);
      if (aggregator_ && (e.kind == schema::EventKind::RangeBegin || e.kind == schema::EventKind::RangeEnd)) {
        aggregator_->on_range_event(e);
        continue;
      }
      if (e.kind == schema::EventKind::RangeBegin || e.kind == schema::EventKind::RangeEnd ||
          e.kind == schema::EventKind::Mark) {
        ok &= write_range_event(e);
        continue;
      }
      if (e.kind == schema::EventKind::PoolUsage) {
        ok &= insert_pool_usage(e);
        continue;
      }
      if (e.kind == schema::EventKind::AllocatorSample) {
        if (aggregator_ && e.allocator_sample.trigger == schema::SampleTrigger::Oom) aggregator_->on_framework_oom();
        ok &= write_allocator_sample(e);
        continue;
      }
      if (aggregator_) {
        ok &= aggregator_->on_call_event(e);
        continue;
      }
      if (e.kind != schema::EventKind::AllocFailed) {
        ok &= add_to_event_group(e);
        continue;
      }
      ok &= flush_event_group();  // rows keep their recording order, and the failure needs its row's id
      const int64_t type = types_.id_of(e);
      ok &= type != 0 || fail_with(types_.last_error());
      bind_event(insert_event_, 1, e, type);
      ok &= step_and_reset_bound(insert_event_);
      sqlite3_bind_int64(insert_failure_, 1, sqlite3_last_insert_rowid(db_));
      if (e.call.has_memory_info) {
        sqlite3_bind_int64(insert_failure_, 2, static_cast<sqlite3_int64>(e.call.device_free));
        sqlite3_bind_int64(insert_failure_, 3, static_cast<sqlite3_int64>(e.call.device_total));
      } else {
        sqlite3_bind_null(insert_failure_, 2);
        sqlite3_bind_null(insert_failure_, 3);
      }
      ok &= step_and_reset(insert_failure_);
    }
  }
  ok &= flush_event_group();
  ok &= insert_pending_ranges();
  if (aggregator_) {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    ok &= aggregator_->end_batch(
        checkpoint_requested_, static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec));
    if (!aggregator_->last_error().empty()) last_error_ = aggregator_->last_error();
    checkpoint_requested_ = false;
  }
  ok &= exec("COMMIT");
  if (ok) strings_written_ = strings_written;
  if (ok) python_frames_written_ = std::max(python_frames_written_, python_frames);
  return ok;
}

bool TraceWriter::insert_pool_usage(const EventRecord& e) {
  sqlite3_stmt* p = insert_pool_usage_;
  sqlite3_bind_int64(p, 1, static_cast<sqlite3_int64>(e.time_ns));
  sqlite3_bind_int64(p, 2, static_cast<sqlite3_int64>(e.pool_usage.pool));
  sqlite3_bind_int(p, 3, e.device);
  sqlite3_bind_int64(p, 4, static_cast<sqlite3_int64>(e.pool_usage.reserved_bytes));
  sqlite3_bind_int64(p, 5, static_cast<sqlite3_int64>(e.pool_usage.used_bytes));
  return step_and_reset(p);
}

bool TraceWriter::write_pool_usage(const std::vector<EventRecord>& samples) {
  if (samples.empty()) return true;
  if (!exec("BEGIN")) return false;
  bool ok = true;
  for (const EventRecord& e : samples) ok &= insert_pool_usage(e);
  return exec("COMMIT") && ok;
}

// Events rows go in groups of kEventsPerInsert per statement: one sqlite3_step per row costs as much again
// as the row itself (statement start, transaction check, halt, reset), so a multi-row INSERT nearly halves
// the writer's time per event (docs/benchmarks.md). Rows are inserted in the order they were added.
bool TraceWriter::add_to_event_group(const EventRecord& e) {
  const int64_t type = types_.id_of(e);
  if (type == 0) return fail_with(types_.last_error());
  bind_event(insert_event_group_, 1 + static_cast<int>(grouped_events_) * kEventColumns, e, type);
  group_types_[grouped_events_] = type;
  group_[grouped_events_++] = &e;
  if (grouped_events_ < kEventsPerInsert) return true;
  grouped_events_ = 0;
  return step_and_reset_bound(insert_event_group_);
}

// Inserts the rows of a group that did not fill, one statement each.
bool TraceWriter::flush_event_group() {
  bool ok = true;
  for (size_t i = 0; i < grouped_events_; ++i) {
    bind_event(insert_event_, 1, *group_[i], group_types_[i]);
    ok &= step_and_reset_bound(insert_event_);
  }
  grouped_events_ = 0;
  return ok;
}

// Every string interned since the last batch. Read after the batch's events were taken, so every name an
// event of this batch refers to is among them (it was interned before its event was recorded).
bool TraceWriter::write_new_strings(uint32_t& written) {
  bool ok = true;
  uint32_t count = string_count();
  for (uint32_t id = written + 1; id <= count; ++id) {
    std::string_view text = string_text(id);
    sqlite3_bind_int64(insert_string_, 1, id);
    sqlite3_bind_text(insert_string_, 2, text.data(), static_cast<int>(text.size()), SQLITE_STATIC);
    ok &= step_and_reset(insert_string_);
  }
  written = count;
  return ok;
}

// NVTX ranges and marks (recorder/event.h: RangePayload, MarkPayload). A range begun in this batch is held until
// the batch ends, so that one that also ends in it (most do) costs one INSERT instead of an INSERT and an UPDATE;
// one still open then is inserted with end_ns NULL and updated when it ends.
bool TraceWriter::write_range_event(const EventRecord& e) {
  if (e.kind == schema::EventKind::Mark) {
    sqlite3_bind_int64(insert_mark_, 1, static_cast<sqlite3_int64>(e.time_ns));
    sqlite3_bind_int64(insert_mark_, 2, e.thread_id);
    sqlite3_bind_int64(insert_mark_, 3, e.mark.domain_id);
    sqlite3_bind_int64(insert_mark_, 4, e.mark.name_id);
    return step_and_reset(insert_mark_);
  }
  const RangePayload& range = e.range;
  if (e.kind == schema::EventKind::RangeBegin) {
    if (range.depth < 0) open_start_end_ranges_[range.app_range_id] = range.row_id;  // found again by the app's id
    pending_index_[range.row_id] = pending_ranges_.size();
    pending_ranges_.push_back(PendingRange{e, 0, 0});
    return true;
  }
  uint64_t id = range.row_id;
  if (id == 0) {
    auto it = open_start_end_ranges_.find(range.app_range_id);
    if (it == open_start_end_ranges_.end()) return true;  // opened before this trace began (e.g. in a parent)
    id = it->second;
    open_start_end_ranges_.erase(it);
  }
  if (auto it = pending_index_.find(id); it != pending_index_.end()) {
    PendingRange& r = pending_ranges_[it->second];
    r.end_ns = e.time_ns;
    r.end_thread_id = e.thread_id;
    return true;
  }
  sqlite3_bind_int64(end_range_, 1, static_cast<sqlite3_int64>(id));
  sqlite3_bind_int64(end_range_, 2, static_cast<sqlite3_int64>(e.time_ns));
  sqlite3_bind_int64(end_range_, 3, e.thread_id);
  return step_and_reset(end_range_);
}

bool TraceWriter::insert_pending_ranges() {
  bool ok = true;
  for (const PendingRange& r : pending_ranges_) {
    const EventRecord& b = r.begin;
    sqlite3_bind_int64(insert_range_, 1, static_cast<sqlite3_int64>(b.range.row_id));
    sqlite3_bind_int64(insert_range_, 2, b.thread_id);
    sqlite3_bind_int64(insert_range_, 3, b.range.domain_id);
    sqlite3_bind_int64(insert_range_, 4, b.range.name_id);
    sqlite3_bind_int64(insert_range_, 5, static_cast<sqlite3_int64>(b.time_ns));
    sqlite3_bind_int(insert_range_, 6, b.range.depth);
    if (r.end_thread_id != 0) {
      sqlite3_bind_int64(insert_range_, 7, static_cast<sqlite3_int64>(r.end_ns));
      sqlite3_bind_int64(insert_range_, 8, r.end_thread_id);
    }  // else both stay NULL (step_and_reset clears the bindings)
    ok &= step_and_reset(insert_range_);
  }
  pending_ranges_.clear();
  pending_index_.clear();
  return ok;
}

bool TraceWriter::fail_with(const std::string& error) {
  last_error_ = error;
  return false;
}

bool TraceWriter::record_stop_reason(const std::string& reason) {
  if (!db_) return false;
  const std::string write_error = last_error_;
  if (!sqlite3_get_autocommit(db_)) exec("ROLLBACK");  // SQLite may have rolled it back already
  disk_reserve_.release();                             // room for the upsert's WAL frames on a full disk
  const bool stored = schema::set_meta(upsert_meta_, schema::meta::kStopReason, reason);
  last_error_ = write_error;
  return stored;
}

void TraceWriter::close() {
  if (aggregator_) aggregator_->close();
  aggregator_.reset();
  types_.close();
  for (sqlite3_stmt* s : {insert_event_, insert_event_group_, insert_failure_, insert_stack_, insert_frame_,
                          insert_module_, upsert_meta_, insert_pool_usage_, insert_string_, insert_range_, end_range_,
                          insert_mark_, insert_python_frame_, insert_allocator_sample_}) {
    sqlite3_finalize(s);
  }
  insert_event_ = insert_event_group_ = insert_failure_ = insert_stack_ = insert_frame_ = insert_module_ = nullptr;
  upsert_meta_ = insert_pool_usage_ = insert_string_ = insert_range_ = end_range_ = insert_mark_ = nullptr;
  insert_python_frame_ = insert_allocator_sample_ = nullptr;
  sqlite3_close(db_);
  db_ = nullptr;
  disk_reserve_.release();
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
  bool ok = step_and_reset_bound(stmt);
  sqlite3_clear_bindings(stmt);
  return ok;
}

bool TraceWriter::step_and_reset_bound(sqlite3_stmt* stmt) {
  int rc = sqlite3_step(stmt);
  sqlite3_reset(stmt);
  if (rc == SQLITE_DONE || rc == SQLITE_ROW) return true;
  last_error_ = sqlite3_errmsg(db_);
  return false;
}

}  // namespace gmt::recorder
