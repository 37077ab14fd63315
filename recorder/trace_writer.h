// Writes batches of events, stacks and modules into the SQLite trace. Used only by the recorder's writer
// thread (and by the final flush at exit), never by a hook.
#pragma once

#include <sqlite3.h>

#include <string>
#include <utility>
#include <vector>

#include "recorder/event.h"
#include "recorder/module_map.h"
#include "recorder/stacks.h"

namespace gmt::recorder {

class TraceWriter {
 public:
  // Creates a new trace at `path` (the file must not exist: never overwrite) readable by the owner only.
  // On failure returns false and sets `error` to a sentence for the user.
  bool create(const std::string& path, std::string& error);

  void set_meta(const char* key, const std::string& value);
  // One transaction: stacks first, so every event's stack_id exists when its event does.
  bool write_batch(const std::vector<NewStack>& stacks, const EventRecord* const* event_runs,
                   const size_t* run_lengths, size_t runs, const std::vector<Module>& modules);
  void close();
  bool is_open() const { return db_ != nullptr; }
  const std::string& last_error() const { return last_error_; }

 private:
  bool exec(const char* sql);
  bool prepare(sqlite3_stmt** stmt, const char* sql);
  bool step_and_reset(sqlite3_stmt* stmt);

  sqlite3* db_ = nullptr;
  sqlite3_stmt* insert_event_ = nullptr;
  sqlite3_stmt* insert_failure_ = nullptr;
  sqlite3_stmt* insert_stack_ = nullptr;
  sqlite3_stmt* insert_frame_ = nullptr;
  sqlite3_stmt* insert_module_ = nullptr;
  sqlite3_stmt* upsert_meta_ = nullptr;
  sqlite3_stmt* insert_pool_usage_ = nullptr;
  std::string last_error_;
};

}  // namespace gmt::recorder
