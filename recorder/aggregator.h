// `run --aggregate`: the writer thread's side of a bounded trace (schema/aggregate_schema.h; docs/trace-format.md
// "Aggregate traces"). The writer hands every CUDA-call event to this class instead of inserting it; the class keeps
// the live set in memory and writes, at each checkpoint, only what the analyses need:
//   - the Alloc row of every allocation still live (so a leak is exact), and its Free row too when it was live at a
//     moment the report looks at: a new peak of any tracked level (AggregateTrackers), or one of the first
//     kMaxFailuresWithContext failed allocations. Rows keep the id they would have had in the full trace, so the
//     `events` table is a time-ordered subsequence of the full one and the report's event pass reads it unchanged;
//   - per window and allocating stack: allocations and frees, counts and bytes (aggregate_windows);
//   - per window: the lowest, highest and last live bytes per device (aggregate_levels);
//   - NVTX ranges per name and window, and per name the live bytes allocated inside it at each end (decimated);
//   - every other event (failures, streams, pools, VMM, segments' companions...) in full, as the full trace does.
// It runs on the writer thread only (under the recorder's write lock), never on an app thread: the app pays the same
// per event as for a full trace. A checkpoint runs inside the writer's batch transaction, at most every
// kCheckpointInterval, and at once for a failed allocation, a fatal-signal flush and the end: a process killed at any
// moment leaves the state of its last checkpoint (and every event kept in full up to its last batch).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "recorder/aggregate_state.h"
#include "recorder/event.h"
#include "recorder/event_types.h"

namespace gmt::recorder {

class Aggregator {
 public:
  // Creates the aggregate tables in `db` (the writer's open trace) and sets its meta. `t0_ns`: the process start.
  // `types`: the writer's event_types (recorder/event_types.h), shared: the same connection and transaction.
  bool open(sqlite3* db, EventTypes* types, uint64_t t0_ns, uint64_t first_window_ns, std::string& error);
  void close();

  // A CUDA-call event (the kinds the full trace writes as an `events` row), in the batch's order.
  bool on_call_event(const EventRecord& e);
  // NVTX ranges: summarized instead of written.
  void on_range_event(const EventRecord& e);
  // A framework's out-of-memory sample (AllocatorSample with trigger Oom): its live set is kept like a failure's.
  void on_framework_oom();
  // At the end of each batch, inside its transaction: a checkpoint when one is due (kCheckpointInterval), forced,
  // or asked for by a failure in this batch.
  bool end_batch(bool force, uint64_t now_ns);

  const std::string& last_error() const { return last_error_; }

 private:
  bool write_event(const EventRecord& e, uint64_t id);
  bool delete_event(uint64_t id);
  bool checkpoint();
  bool write_windows();
  bool step(sqlite3_stmt* s);

  void on_alloc(const EventRecord& e, uint64_t id, int level);
  void leave_app_level(uint64_t address, uint64_t id, uint64_t time_ns);
  bool on_free(const EventRecord& e, uint64_t id, int level);
  void add_trackers(AggregateLive& live);
  void tracker_add(uint32_t index, int64_t bytes, uint64_t id, uint64_t time_ns);
  void unref_kept(uint64_t alloc_id);
  bool live_at_failure(uint64_t alloc_id, uint64_t free_id) const;
  uint32_t tracker(uint64_t key, int level_table, int16_t device);
  size_t window_of(uint64_t time_ns);

  sqlite3* db_ = nullptr;
  EventTypes* types_ = nullptr;
  sqlite3_stmt* insert_event_ = nullptr;
  sqlite3_stmt* delete_event_ = nullptr;
  sqlite3_stmt* insert_failure_ = nullptr;
  sqlite3_stmt* upsert_window_ = nullptr;
  sqlite3_stmt* upsert_level_ = nullptr;
  sqlite3_stmt* upsert_range_ = nullptr;
  sqlite3_stmt* upsert_range_end_ = nullptr;
  sqlite3_stmt* set_meta_ = nullptr;
  std::string last_error_;

  uint64_t next_id_ = 0;  // the id the next events row would have in the full trace
  uint64_t t0_ns_ = 0;
  uint64_t window_ns_ = 0;
  uint64_t last_checkpoint_ns_ = 0;
  bool checkpoint_asked_ = false;  // a failure in this batch
  bool rewrite_windows_ = false;   // the windows merged: every window row is written again
  uint64_t events_seen_ = 0;
  uint64_t rows_in_trace_ = 0;
  uint64_t synchronize_events_ = 0;
  uint64_t failures_without_context_ = 0;

  std::unordered_map<AggregateLiveKey, AggregateLive, AggregateLiveKeyHash> live_;
  std::vector<std::pair<AggregateLiveKey, uint64_t>> born_since_checkpoint_;
  std::unordered_map<uint64_t, AggregateKept> kept_;  // by the allocation's id
  std::vector<uint64_t> kept_to_write_;
  std::vector<uint64_t> to_delete_;
  // Failures whose live set is kept: 2 * id of an AllocFailed row, or 2 * next_id_ - 1 for a framework's OOM sample
  // (between two rows); ascending.
  std::vector<uint64_t> failure_positions_;
  std::vector<AggregateTracker> trackers_;
  std::unordered_map<uint64_t, uint32_t> tracker_index_;
  std::unordered_map<uint64_t, int64_t> vmm_sizes_;  // live VMM physical handles -> bytes (kept in full)
  AggregateWindows windows_;
  AggregateRanges ranges_;
};

}  // namespace gmt::recorder
