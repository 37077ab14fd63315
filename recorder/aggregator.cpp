#include "recorder/aggregator.h"

#include <algorithm>

#include "schema/aggregate_schema.h"
#include "schema/trace_init.h"
#include "schema/trace_schema.h"

namespace gmt::recorder {
namespace {

namespace agg = schema::aggregate;
using schema::EventKind;
using schema::MemoryKind;

// How often the aggregate state is committed without a reason to hurry: what a SIGKILL can lose at most (besides
// the events kept in full, which are committed with every batch as in a full trace).
constexpr uint64_t kCheckpointIntervalNs = 1000000000;

bool counted_kind(MemoryKind kind) {
  return kind == MemoryKind::Device || kind == MemoryKind::Managed || kind == MemoryKind::HostPinned ||
         kind == MemoryKind::VmmPhysical;
}
bool block_kind(MemoryKind kind) { return kind == MemoryKind::TensorBlock || kind == MemoryKind::HeapBlock; }

// Tracker keys: a type in the top byte, then what it is per.
enum TrackerType : uint64_t {
  kCudaTotal = 1,   // the counted kinds together (Report::totals peak)
  kCudaKind = 2,    // one counted kind (peak_by_kind)
  kCudaDevice = 3,  // the counted kinds on one device (DevicePeak, fragmentation at the peak)
  kPool = 4,        // one stream-ordered pool's allocations (PoolUsage used peak)
  kHeapDevice = 5,  // one framework's blocks on one device (heap and tensor-block peaks)
  kAppDevice = 6,   // blocks and CUDA memory that backs no heap, per device (app level peaks)
  kAppTotal = 7,
  kImported = 8,  // memory opened from another process, per device (ImportedMemory's peaks)
};
uint64_t tracker_key(TrackerType type, int16_t device, uint64_t what) {
  return (uint64_t{type} << 56) ^ (uint64_t(uint16_t(device)) << 40) ^ (what & 0xffffffffffull) ^
         ((what >> 40) * 0x9E3779B97F4A7C15ull & 0x00ffffffffffffffull);
}

constexpr const char* kInsertEventSql =
    "INSERT OR REPLACE INTO event_rows(id, time_ns, type, thread_id, stream, address, size, stack_id, error, handle) "
    "VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)";

}  // namespace

bool Aggregator::open(sqlite3* db, EventTypes* types, uint64_t t0_ns, uint64_t first_window_ns, std::string& error) {
  db_ = db;
  types_ = types;
  t0_ns_ = t0_ns;
  window_ns_ = first_window_ns > 0 ? first_window_ns : agg::kFirstWindowNs;
  char* message = nullptr;
  if (sqlite3_exec(db_, agg::kCreateAggregateSql, nullptr, nullptr, &message) != SQLITE_OK) {
    error = message ? message : sqlite3_errmsg(db_);
    sqlite3_free(message);
    return false;
  }
  auto prepare = [&](sqlite3_stmt** s, const char* sql) {
    if (sqlite3_prepare_v2(db_, sql, -1, s, nullptr) == SQLITE_OK) return true;
    error = sqlite3_errmsg(db_);
    return false;
  };
  bool ok =
      prepare(&insert_event_, kInsertEventSql) && prepare(&delete_event_, "DELETE FROM event_rows WHERE id = ?1") &&
      prepare(&insert_failure_, "INSERT OR REPLACE INTO alloc_failures(event_id, device_free, device_total) "
                                "VALUES (?1, ?2, ?3)") &&
      prepare(&upsert_window_, "INSERT OR REPLACE INTO aggregate_windows(window, stack_id, level, memory_kind, "
                               "device, allocs, alloc_bytes, frees, free_bytes) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)") &&
      prepare(&upsert_level_, "INSERT OR REPLACE INTO aggregate_levels(window, level, device, low_bytes, "
                              "high_bytes, end_bytes) VALUES (?1,?2,?3,?4,?5,?6)") &&
      prepare(&upsert_range_, "INSERT OR REPLACE INTO aggregate_ranges(window, domain_id, name_id, repetitions, "
                              "total_ns, max_ns) VALUES (?1,?2,?3,?4,?5,?6)") &&
      prepare(&upsert_range_end_, "INSERT OR REPLACE INTO aggregate_range_ends(domain_id, name_id, repetition, "
                                  "end_ns, live_bytes) VALUES (?1,?2,?3,?4,?5)") &&
      prepare(&set_meta_, schema::kSetMetaSql);
  if (!ok) return false;
  schema::set_meta(set_meta_, agg::kTraceModeKey, agg::kTraceModeAggregate);
  schema::set_meta(set_meta_, agg::kT0NsKey, std::to_string(t0_ns_));
  schema::set_meta(set_meta_, agg::kWindowNsKey, std::to_string(window_ns_));
  return true;
}

void Aggregator::close() {
  for (sqlite3_stmt* s : {insert_event_, delete_event_, insert_failure_, upsert_window_, upsert_level_, upsert_range_,
                          upsert_range_end_, set_meta_}) {
    sqlite3_finalize(s);
  }
  insert_event_ = delete_event_ = insert_failure_ = upsert_window_ = upsert_level_ = nullptr;
  upsert_range_ = upsert_range_end_ = set_meta_ = nullptr;
  db_ = nullptr;
}

bool Aggregator::step(sqlite3_stmt* s) {
  const int rc = sqlite3_step(s);
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  if (rc == SQLITE_DONE || rc == SQLITE_ROW) return true;
  last_error_ = sqlite3_errmsg(db_);
  return false;
}

bool Aggregator::write_event(const EventRecord& e, uint64_t id) {
  const int64_t type = types_->id_of(e);
  if (type == 0) {
    last_error_ = types_->last_error();
    return false;
  }
  sqlite3_stmt* s = insert_event_;
  const CallPayload& call = e.call;
  sqlite3_bind_int64(s, 1, static_cast<sqlite3_int64>(id));
  sqlite3_bind_int64(s, 2, static_cast<sqlite3_int64>(e.time_ns));
  sqlite3_bind_int64(s, 3, type);
  sqlite3_bind_int64(s, 4, e.thread_id);
  sqlite3_bind_int64(s, 5, static_cast<sqlite3_int64>(call.stream));
  sqlite3_bind_int64(s, 6, static_cast<sqlite3_int64>(call.address));
  sqlite3_bind_int64(s, 7, static_cast<sqlite3_int64>(call.size));
  sqlite3_bind_int64(s, 8, e.stack_id);
  sqlite3_bind_int(s, 9, call.error);
  sqlite3_bind_int64(s, 10, static_cast<sqlite3_int64>(call.handle));
  ++rows_in_trace_;
  return step(s);
}

bool Aggregator::delete_event(uint64_t id) {
  sqlite3_bind_int64(delete_event_, 1, static_cast<sqlite3_int64>(id));
  if (rows_in_trace_ > 0) --rows_in_trace_;
  return step(delete_event_);
}

size_t Aggregator::window_of(uint64_t time_ns) {
  const uint64_t offset = time_ns > t0_ns_ ? time_ns - t0_ns_ : 0;
  size_t window = offset / window_ns_;
  while (window >= static_cast<size_t>(agg::kMaxWindows)) {
    window_ns_ *= 2;
    windows_.merge_pairs();
    rewrite_windows_ = true;
    window = offset / window_ns_;
  }
  return window;
}

uint32_t Aggregator::tracker(uint64_t key, int level_table, int16_t device) {
  auto [it, inserted] = tracker_index_.try_emplace(key, static_cast<uint32_t>(trackers_.size()));
  if (inserted) {
    trackers_.emplace_back();
    trackers_.back().level_table = level_table;
    trackers_.back().device = device;
  }
  return it->second;
}

// The levels an allocation counts in (or, for a segment, whose peaks it must be kept for without counting).
void Aggregator::add_trackers(AggregateLive& live) {
  const EventRecord& e = live.alloc;
  auto add = [&live](uint32_t index, bool contributes) {
    if (live.trackers == kMaxTrackersPerAllocation) return;
    if (contributes) live.contributes |= uint8_t(1u << live.trackers);
    live.tracker[live.trackers++] = index;
  };
  const int16_t device = e.device;
  if (e.kind == EventKind::SegmentAlloc) {  // a heap's segment: kept with its blocks' peaks (heap at the peak)
    add(tracker(tracker_key(kHeapDevice, device, static_cast<uint64_t>(e.source)), -1, device), false);
    add(tracker(tracker_key(kAppDevice, device, 0), agg::kLevelBlock, device), false);
    return;
  }
  if (block_kind(e.memory_kind)) {
    add(tracker(tracker_key(kHeapDevice, device, static_cast<uint64_t>(e.source)), -1, device), true);
    add(tracker(tracker_key(kAppDevice, device, 0), agg::kLevelBlock, device), true);
    add(tracker(tracker_key(kAppTotal, -1, 0), -1, -1), true);
    return;
  }
  if (e.memory_kind == MemoryKind::IpcImported) {
    add(tracker(tracker_key(kImported, device, 0), -1, device), true);
    return;
  }
  if (!counted_kind(e.memory_kind)) return;
  add(tracker(tracker_key(kCudaTotal, -1, 0), -1, -1), true);
  add(tracker(tracker_key(kCudaKind, -1, static_cast<uint64_t>(e.memory_kind)), -1, -1), true);
  add(tracker(tracker_key(kCudaDevice, device, 0), agg::kLevelCuda, device), true);
  if (e.call.handle != 0 && e.memory_kind == MemoryKind::Device) {
    add(tracker(tracker_key(kPool, device, e.call.handle), -1, device), true);
  }
  add(tracker(tracker_key(kAppDevice, device, 0), agg::kLevelBlock, device), true);
  add(tracker(tracker_key(kAppTotal, -1, 0), -1, -1), true);
}

// A tracked level changes by `bytes` at event `id`: a new peak forgets what was kept for the old one.
void Aggregator::tracker_add(uint32_t index, int64_t bytes, uint64_t id, uint64_t time_ns) {
  AggregateTracker& t = trackers_[index];
  const int64_t before = t.level;
  t.level += bytes;
  if (t.level_table >= 0) {
    windows_.level_changed(static_cast<uint32_t>(window_of(time_ns)), t.level_table, t.device, before, t.level);
  }
  if (t.level <= t.peak) return;
  t.peak = t.level;
  t.peak_id = id;
  std::vector<uint64_t> released;
  released.swap(t.kept);
  for (uint64_t alloc_id : released) unref_kept(alloc_id);
}

void Aggregator::unref_kept(uint64_t alloc_id) {
  auto it = kept_.find(alloc_id);
  if (it == kept_.end() || --it->second.refs > 0 || it->second.permanent) return;
  if (it->second.alloc_written) to_delete_.push_back(alloc_id);
  if (it->second.free_written) to_delete_.push_back(it->second.free_id);
  kept_.erase(it);
}

bool Aggregator::live_at_failure(uint64_t alloc_id, uint64_t free_id) const {
  // Live at a failure at position p (2 * row id, or between rows) when 2 * alloc_id < p < 2 * free_id.
  auto it = std::upper_bound(failure_positions_.begin(), failure_positions_.end(), 2 * alloc_id);
  return it != failure_positions_.end() && *it < 2 * free_id;
}

// A heap's segment at `address`: the CUDA allocation behind it (recorded just before) leaves the app level, whose
// peaks the report computes over blocks and the CUDA memory that backs no heap. It still watches those peaks.
void Aggregator::leave_app_level(uint64_t address, uint64_t id, uint64_t time_ns) {
  for (schema::Source source : {schema::Source::RuntimeHook, schema::Source::Cupti, schema::Source::DriverHook}) {
    auto it = live_.find({address, static_cast<uint8_t>(source), static_cast<uint8_t>(agg::kLevelCuda)});
    if (it == live_.end()) continue;
    AggregateLive& live = it->second;
    const uint32_t app_device =
        tracker(tracker_key(kAppDevice, live.alloc.device, 0), agg::kLevelBlock, live.alloc.device);
    const uint32_t app_total = tracker(tracker_key(kAppTotal, -1, 0), -1, -1);
    for (uint8_t i = 0; i < live.trackers; ++i) {
      const bool app_level = live.tracker[i] == app_device || live.tracker[i] == app_total;
      if (!app_level || !(live.contributes & (1u << i))) continue;
      live.contributes &= static_cast<uint8_t>(~(1u << i));
      tracker_add(live.tracker[i], -static_cast<int64_t>(live.alloc.call.size), id, time_ns);
    }
    return;
  }
}

void Aggregator::on_alloc(const EventRecord& e, uint64_t id, int level) {
  AggregateWindowCell& counted =
      windows_.cell({static_cast<uint32_t>(window_of(e.time_ns)), e.stack_id, static_cast<uint8_t>(level),
                     static_cast<uint8_t>(e.memory_kind), e.device});
  ++counted.allocs;
  counted.alloc_bytes += e.call.size;
  // cudaMalloc(&p, 0) may succeed with p == NULL: counted, never live (as the report's pass has it).
  if (e.call.address == 0) return;
  if (level == agg::kLevelSegment) leave_app_level(e.call.address, id, e.time_ns);
  const AggregateLiveKey key{e.call.address, static_cast<uint8_t>(e.source), static_cast<uint8_t>(level)};
  auto [it, inserted] = live_.try_emplace(key);
  if (!inserted) {
    // An address allocated again without a free in between (the report counts an inconsistency): the older one
    // is kept for good, as an Alloc row without its Free, so that the report sees what the full trace shows.
    AggregateLive& old = it->second;
    for (uint8_t i = 0; i < old.trackers; ++i) {
      if (old.contributes & (1u << i))
        tracker_add(old.tracker[i], -static_cast<int64_t>(old.alloc.call.size), id, e.time_ns);
    }
    AggregateKept kept{old.alloc, EventRecord{}, 0, old.written, false, true, 0};
    kept_[old.id] = kept;
    kept_to_write_.push_back(old.id);
    it->second = AggregateLive{};
  }
  AggregateLive& live = it->second;
  live.alloc = e;
  live.id = id;
  add_trackers(live);
  if (level == agg::kLevelCuda && e.call.address != 0) live.ranges = ranges_.inside(e.thread_id, live.range);
  for (uint8_t i = 0; i < live.ranges; ++i) ranges_.names[live.range[i]].live_inside += e.call.size;
  for (uint8_t i = 0; i < live.trackers; ++i) {
    if (live.contributes & (1u << i)) tracker_add(live.tracker[i], static_cast<int64_t>(e.call.size), id, e.time_ns);
  }
  born_since_checkpoint_.emplace_back(key, id);
}

// False when the free matched no live allocation (it is then written in full, as the full trace has it).
bool Aggregator::on_free(const EventRecord& e, uint64_t id, int level) {
  if (e.call.address == 0) return true;  // cudaFree(0) frees nothing (apps call it to create the context)
  auto it = live_.find({e.call.address, static_cast<uint8_t>(e.source), static_cast<uint8_t>(level)});
  if (it == live_.end()) return false;
  AggregateLive& live = it->second;
  const auto size = static_cast<int64_t>(live.alloc.call.size);
  uint32_t refs = 0;
  for (uint8_t i = 0; i < live.trackers; ++i) {
    AggregateTracker& t = trackers_[live.tracker[i]];
    if (t.peak_id != 0 && live.id <= t.peak_id) {  // live at this level's current peak
      t.kept.push_back(live.id);
      ++refs;
    }
  }
  const bool permanent = live_at_failure(live.id, id);
  if (refs > 0 || permanent) {
    kept_[live.id] = AggregateKept{live.alloc, e, id, live.written, false, permanent, refs};
    kept_to_write_.push_back(live.id);
  } else if (live.written) {
    to_delete_.push_back(live.id);
  }
  for (uint8_t i = 0; i < live.trackers; ++i) {
    if (live.contributes & (1u << i)) tracker_add(live.tracker[i], -size, id, e.time_ns);
  }
  for (uint8_t i = 0; i < live.ranges; ++i) ranges_.names[live.range[i]].live_inside -= size;
  AggregateWindowCell& cell =
      windows_.cell({static_cast<uint32_t>(window_of(e.time_ns)), live.alloc.stack_id, static_cast<uint8_t>(level),
                     static_cast<uint8_t>(live.alloc.memory_kind), live.alloc.device});
  ++cell.frees;
  cell.free_bytes += static_cast<uint64_t>(size);
  live_.erase(it);
  return true;
}

bool Aggregator::on_call_event(const EventRecord& e) {
  const uint64_t id = ++next_id_;
  ++events_seen_;
  const int level = e.kind == EventKind::SegmentAlloc || e.kind == EventKind::SegmentFree ? agg::kLevelSegment
                    : block_kind(e.memory_kind)                                           ? agg::kLevelBlock
                                                                                          : agg::kLevelCuda;
  switch (e.kind) {
    case EventKind::Alloc:
    case EventKind::SegmentAlloc: on_alloc(e, id, level); return true;
    case EventKind::Free:
    case EventKind::SegmentFree:
      if (on_free(e, id, level)) return true;
      return write_event(e, id);  // unmatched: as in the full trace
    case EventKind::Synchronize: ++synchronize_events_; return true;
    case EventKind::VmmCreate: {
      vmm_sizes_[e.call.handle] = static_cast<int64_t>(e.call.size);
      AggregateLive live;
      live.alloc = e;
      live.alloc.memory_kind = MemoryKind::VmmPhysical;
      add_trackers(live);
      for (uint8_t i = 0; i < live.trackers; ++i) tracker_add(live.tracker[i], live.alloc.call.size, id, e.time_ns);
      return write_event(e, id);
    }
    case EventKind::VmmRelease: {
      auto it = vmm_sizes_.find(e.call.handle);
      if (it != vmm_sizes_.end()) {
        AggregateLive live;
        live.alloc = e;
        live.alloc.memory_kind = MemoryKind::VmmPhysical;
        add_trackers(live);
        for (uint8_t i = 0; i < live.trackers; ++i) tracker_add(live.tracker[i], -it->second, id, e.time_ns);
        vmm_sizes_.erase(it);
      }
      return write_event(e, id);
    }
    case EventKind::AllocFailed: {
      if (failure_positions_.size() < static_cast<size_t>(agg::kMaxFailuresWithContext)) {
        failure_positions_.push_back(2 * id);
      } else {
        ++failures_without_context_;
      }
      checkpoint_asked_ = true;
      bool ok = write_event(e, id);
      sqlite3_bind_int64(insert_failure_, 1, static_cast<sqlite3_int64>(id));
      if (e.call.has_memory_info) {
        sqlite3_bind_int64(insert_failure_, 2, static_cast<sqlite3_int64>(e.call.device_free));
        sqlite3_bind_int64(insert_failure_, 3, static_cast<sqlite3_int64>(e.call.device_total));
      }
      return step(insert_failure_) && ok;
    }
    default: return write_event(e, id);
  }
}

void Aggregator::on_framework_oom() {
  if (failure_positions_.size() < static_cast<size_t>(agg::kMaxFailuresWithContext)) {
    failure_positions_.push_back(2 * (next_id_ + 1) - 1);
  } else {
    ++failures_without_context_;
  }
  checkpoint_asked_ = true;
}

void Aggregator::on_range_event(const EventRecord& e) {
  const RangePayload& r = e.range;
  AggregateRanges& rs = ranges_;
  if (e.kind == EventKind::RangeBegin) {
    const uint32_t key = rs.key_of(r.domain_id, r.name_id);
    rs.open[r.row_id] = AggregateRanges::Open{e.time_ns, key, e.thread_id, r.depth >= 0};
    if (r.depth >= 0) {
      rs.open_on_thread[e.thread_id].push_back(r.row_id);
    } else {
      rs.start_end_by_app[r.app_range_id] = r.row_id;
      rs.open_start_end.push_back(r.row_id);
    }
    return;
  }
  if (e.kind != EventKind::RangeEnd) return;
  uint64_t row_id = r.row_id;
  if (row_id == 0) {
    auto it = rs.start_end_by_app.find(r.app_range_id);
    if (it == rs.start_end_by_app.end()) return;  // opened before this trace began
    row_id = it->second;
    rs.start_end_by_app.erase(it);
  }
  auto it = rs.open.find(row_id);
  if (it == rs.open.end()) return;
  const AggregateRanges::Open open = it->second;
  rs.open.erase(it);
  std::vector<uint64_t>& list = open.push_pop ? rs.open_on_thread[open.thread_id] : rs.open_start_end;
  if (auto pos = std::find(list.rbegin(), list.rend(), row_id); pos != list.rend()) list.erase(std::next(pos).base());
  const uint64_t duration = e.time_ns > open.start_ns ? e.time_ns - open.start_ns : 0;
  const AggregateRanges::Name& name = rs.names[open.key];
  const uint64_t window = window_of(e.time_ns);
  const uint64_t cell_key = window << 48 | (uint64_t{name.domain_id} & 0xffffff) << 24 | (name.name_id & 0xffffff);
  AggregateRangeCell& cell = windows_.ranges[cell_key];
  ++cell.repetitions;
  cell.total_ns += duration;
  cell.max_ns = std::max(cell.max_ns, duration);
  cell.dirty = true;
  rs.end(open.key, e.time_ns);
}

bool Aggregator::end_batch(bool force, uint64_t now_ns) {
  if (!force && !checkpoint_asked_ && now_ns < last_checkpoint_ns_ + kCheckpointIntervalNs) return true;
  last_checkpoint_ns_ = now_ns;
  checkpoint_asked_ = false;
  return checkpoint();
}

bool Aggregator::checkpoint() {
  bool ok = true;
  for (const auto& [key, id] : born_since_checkpoint_) {
    auto it = live_.find(key);
    if (it == live_.end() || it->second.id != id || it->second.written) continue;
    ok &= write_event(it->second.alloc, id);
    it->second.written = true;
  }
  born_since_checkpoint_.clear();
  for (uint64_t alloc_id : kept_to_write_) {
    auto it = kept_.find(alloc_id);
    if (it == kept_.end()) continue;
    AggregateKept& k = it->second;
    if (!k.alloc_written) ok &= write_event(k.alloc, alloc_id);
    if (!k.free_written && k.free_id != 0) ok &= write_event(k.free, k.free_id);
    k.alloc_written = true;
    k.free_written = k.free_id != 0;
  }
  kept_to_write_.clear();
  for (uint64_t id : to_delete_) ok &= delete_event(id);
  to_delete_.clear();
  ok &= write_windows();
  schema::set_meta(set_meta_, agg::kWindowNsKey, std::to_string(window_ns_));
  schema::set_meta(set_meta_, agg::kEventsSeenKey, std::to_string(events_seen_));
  schema::set_meta(set_meta_, agg::kEventsKeptKey, std::to_string(rows_in_trace_));
  schema::set_meta(set_meta_, agg::kSynchronizeEventsKey, std::to_string(synchronize_events_));
  schema::set_meta(set_meta_, agg::kFailuresWithContextKey, std::to_string(failure_positions_.size()));
  schema::set_meta(set_meta_, agg::kFailuresWithoutContextKey, std::to_string(failures_without_context_));
  return ok;
}

bool Aggregator::write_windows() {
  bool ok = true;
  if (rewrite_windows_) {
    ok &= sqlite3_exec(db_, "DELETE FROM aggregate_windows; DELETE FROM aggregate_levels; DELETE FROM aggregate_ranges",
                       nullptr, nullptr, nullptr) == SQLITE_OK;
    rewrite_windows_ = false;
  }
  for (auto& [key, cell] : windows_.cells) {
    if (!cell.dirty) continue;
    cell.dirty = false;
    sqlite3_stmt* s = upsert_window_;
    sqlite3_bind_int64(s, 1, key.window);
    sqlite3_bind_int64(s, 2, key.stack_id);
    sqlite3_bind_int(s, 3, key.level);
    sqlite3_bind_int(s, 4, key.memory_kind);
    sqlite3_bind_int(s, 5, key.device);
    sqlite3_bind_int64(s, 6, static_cast<sqlite3_int64>(cell.allocs));
    sqlite3_bind_int64(s, 7, static_cast<sqlite3_int64>(cell.alloc_bytes));
    sqlite3_bind_int64(s, 8, static_cast<sqlite3_int64>(cell.frees));
    sqlite3_bind_int64(s, 9, static_cast<sqlite3_int64>(cell.free_bytes));
    ok &= step(s);
  }
  for (auto& [key, cell] : windows_.levels) {
    if (!cell.dirty) continue;
    cell.dirty = false;
    sqlite3_stmt* s = upsert_level_;
    sqlite3_bind_int64(s, 1, static_cast<sqlite3_int64>(key >> 32));
    sqlite3_bind_int(s, 2, static_cast<int>((key >> 16) & 0xff));
    sqlite3_bind_int(s, 3, static_cast<int16_t>(key & 0xffff));
    sqlite3_bind_int64(s, 4, cell.low);
    sqlite3_bind_int64(s, 5, cell.high);
    sqlite3_bind_int64(s, 6, cell.end);
    ok &= step(s);
  }
  for (auto& [key, cell] : windows_.ranges) {
    if (!cell.dirty) continue;
    cell.dirty = false;
    sqlite3_stmt* s = upsert_range_;
    sqlite3_bind_int64(s, 1, static_cast<sqlite3_int64>(key >> 48));
    sqlite3_bind_int64(s, 2, static_cast<sqlite3_int64>((key >> 24) & 0xffffff));
    sqlite3_bind_int64(s, 3, static_cast<sqlite3_int64>(key & 0xffffff));
    sqlite3_bind_int64(s, 4, static_cast<sqlite3_int64>(cell.repetitions));
    sqlite3_bind_int64(s, 5, static_cast<sqlite3_int64>(cell.total_ns));
    sqlite3_bind_int64(s, 6, static_cast<sqlite3_int64>(cell.max_ns));
    ok &= step(s);
  }
  for (uint32_t index : ranges_.dirty_names) {
    AggregateRanges::Name& n = ranges_.names[index];
    if (n.rewrite) {
      sqlite3_stmt* del = nullptr;
      sqlite3_prepare_v2(db_, "DELETE FROM aggregate_range_ends WHERE domain_id = ?1 AND name_id = ?2", -1, &del,
                         nullptr);
      sqlite3_bind_int64(del, 1, n.domain_id);
      sqlite3_bind_int64(del, 2, n.name_id);
      ok &= sqlite3_step(del) == SQLITE_DONE;
      sqlite3_finalize(del);
      n.rewrite = false;
    }
    for (; n.written < n.series.size(); ++n.written) {
      sqlite3_stmt* s = upsert_range_end_;
      sqlite3_bind_int64(s, 1, n.domain_id);
      sqlite3_bind_int64(s, 2, n.name_id);
      sqlite3_bind_int64(s, 3, static_cast<sqlite3_int64>(n.written * n.stride));
      sqlite3_bind_int64(s, 4, static_cast<sqlite3_int64>(n.series[n.written].first));
      sqlite3_bind_int64(s, 5, n.series[n.written].second);
      ok &= step(s);
    }
  }
  ranges_.dirty_names.clear();
  return ok;
}

}  // namespace gmt::recorder
