// Interns what an event is and where (schema v12's event_types: kind, api, source, memory kind, device, context)
// for the writer thread, so that each event row stores only the small id of its type. A run has a few dozen such
// combinations; most consecutive events share one, which the last-used check answers without a hash lookup.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <unordered_map>

#include "recorder/event.h"

namespace gmt::recorder {

class EventTypes {
 public:
  // Prepares the insert on `db` (a new trace: no types yet). False, with `error`, when SQLite refuses.
  bool open(sqlite3* db, std::string& error);
  void close();

  // The id of the type of `e` (a call event), inserting its event_types row first when it is new: in the
  // caller's transaction, before the event row that names it. 0 when SQLite failed (last_error() says why): a
  // failed batch stops the recording (recorder/writer_thread.cpp), so an id is never handed out twice.
  int64_t id_of(const EventRecord& e);

  const std::string& last_error() const { return last_error_; }

 private:
  struct Key {
    uint8_t kind, api, source, memory_kind;
    int32_t device;
    uint64_t context;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };

  sqlite3* db_ = nullptr;
  sqlite3_stmt* insert_ = nullptr;
  std::unordered_map<Key, int64_t, KeyHash> ids_;
  Key last_{};
  int64_t last_id_ = 0;
  int64_t next_id_ = 1;
  std::string last_error_;
};

}  // namespace gmt::recorder
