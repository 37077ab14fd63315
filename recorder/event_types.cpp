#include "recorder/event_types.h"

namespace gmt::recorder {

size_t EventTypes::KeyHash::operator()(const Key& k) const {
  uint64_t h = (uint64_t{k.kind} << 24) ^ (uint64_t{k.api} << 16) ^ (uint64_t{k.source} << 8) ^ k.memory_kind;
  for (uint64_t part : {uint64_t(uint32_t(k.device)), k.context}) {
    h = (h ^ part) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
  }
  return static_cast<size_t>(h);
}

bool EventTypes::open(sqlite3* db, std::string& error) {
  db_ = db;
  const char* sql = "INSERT INTO event_types(id, kind, api, source, memory_kind, device, context) "
                    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
  if (sqlite3_prepare_v2(db_, sql, -1, &insert_, nullptr) == SQLITE_OK) return true;
  error = sqlite3_errmsg(db_);
  return false;
}

void EventTypes::close() {
  sqlite3_finalize(insert_);
  insert_ = nullptr;
  db_ = nullptr;
  ids_.clear();
  last_id_ = 0;
}

int64_t EventTypes::id_of(const EventRecord& e) {
  const auto byte = [](auto value) { return static_cast<uint8_t>(value); };
  const Key key{byte(e.kind), byte(e.api), byte(e.source), byte(e.memory_kind), e.device, e.call.context};
  if (last_id_ != 0 && key == last_) return last_id_;
  auto found = ids_.find(key);
  if (found == ids_.end()) {
    const int64_t id = next_id_;
    sqlite3_bind_int64(insert_, 1, id);
    sqlite3_bind_int(insert_, 2, key.kind);
    sqlite3_bind_int(insert_, 3, key.api);
    sqlite3_bind_int(insert_, 4, key.source);
    sqlite3_bind_int(insert_, 5, key.memory_kind);
    sqlite3_bind_int(insert_, 6, key.device);
    sqlite3_bind_int64(insert_, 7, static_cast<sqlite3_int64>(key.context));
    const int rc = sqlite3_step(insert_);
    sqlite3_reset(insert_);
    if (rc != SQLITE_DONE) {
      last_error_ = sqlite3_errmsg(db_);
      return 0;
    }
    ++next_id_;
    found = ids_.emplace(key, id).first;
  }
  last_ = key;
  last_id_ = found->second;
  return last_id_;
}

}  // namespace gmt::recorder
