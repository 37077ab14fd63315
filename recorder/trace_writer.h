// Writes batches of events, stacks and modules into the SQLite trace. Used only by the recorder's writer
// thread (and by the final flush at exit), never by a hook.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "recorder/aggregator.h"
#include "recorder/disk_reserve.h"
#include "recorder/driver_queries.h"
#include "recorder/event.h"
#include "recorder/event_types.h"
#include "recorder/stacks.h"
#include "schema/trace_naming.h"
#include "unwind/module_map.h"

namespace gmt::recorder {

// Told about the writer's own work and the events it writes, so that they can be shown on a tool's timeline
// (nvtx/emit.cpp: `run --nvtx-emit`). Called in the thread that writes (the writer thread, or the final flush
// at exit), with the writer's lock held; never from a hook. None by default.
class WriterObserver {
 public:
  virtual ~WriterObserver() = default;
  virtual void on_create_begin() = 0;
  virtual void on_create_end() = 0;
  virtual void on_batch_begin(size_t events) = 0;       // every batch, also empty ones (every 200 ms)
  virtual void on_event(const EventRecord& event) = 0;  // each event of the batch, in order
  virtual void on_batch_end() = 0;
};
// Set once, before the first trace is created (or never).
void set_writer_observer(WriterObserver* observer);

class TraceWriter {
 public:
  // Creates a new trace at `path` (the file must not exist: never overwrite) readable by the owner only.
  // On failure returns false and sets `error` to a sentence for the user.
  bool create(const std::string& path, std::string& error);

  // `run --aggregate` (recorder/aggregator.h): from now on CUDA-call events and NVTX ranges go to the aggregator, which
  // keeps a bounded trace. Right after create(). False (and `error` says why) when its tables cannot be made.
  bool enable_aggregate(uint64_t t0_ns, uint64_t first_window_ns, std::string& error);
  bool aggregating() const { return aggregator_ != nullptr; }
  // The next batch ends with an aggregate checkpoint (a fatal-signal flush, the end): a no-op for a full trace.
  void request_checkpoint() { checkpoint_requested_ = true; }
  // An aggregate checkpoint now, in a transaction of its own (the end); a no-op for a full trace.
  bool checkpoint_now();

  void set_meta(const char* key, const std::string& value);
  // The launcher's rank, local rank and world size, where the launcher said them.
  void set_launch_meta(const schema::LaunchIdentity& launch);
  // One row of the devices table (replaced if the ordinal is there already); empty texts and a negative
  // total are written as NULL. Rare (once per device): the statement is prepared each time.
  void write_device(const DeviceDescription& device);
  // One transaction: stacks first, so every event's stack_id exists when its event does; likewise every
  // string interned so far (recorder/strings.h) before the ranges and marks that name it.
  bool write_batch(const std::vector<NewStack>& stacks, const EventRecord* const* event_runs, const size_t* run_lengths,
                   size_t runs, const std::vector<unwind::Module>& modules);
  // Pool samples taken by the writer thread itself (recorder/pool_peaks.h): PoolUsage records, one transaction.
  bool write_pool_usage(const std::vector<EventRecord>& samples);
  // After a failed write: the failed transaction rolled back, the disk reserve given back (recorder/disk_reserve.h),
  // then meta.stop_reason written through this same connection, which needs no new file handle and no checkpoint (a
  // full disk may refuse a reopen or the close's checkpoint). Returns whether it was stored; last_error() keeps the
  // write's error either way.
  bool record_stop_reason(const std::string& reason);
  void close();
  // In a forked child, for the parent's writer: the child's copy of the reserve's descriptor is closed, so that the
  // parent's space goes back when the parent lets it go. Touches no SQLite state.
  void drop_disk_reserve_in_child() { disk_reserve_.release(); }
  bool is_open() const { return db_ != nullptr; }
  const std::string& last_error() const { return last_error_; }

 private:
  bool create_file(const std::string& path, std::string& error);
  bool exec(const char* sql);
  bool prepare(sqlite3_stmt** stmt, const char* sql);
  bool step_and_reset(sqlite3_stmt* stmt);        // and clears the bindings: for statements that leave some NULL
  bool step_and_reset_bound(sqlite3_stmt* stmt);  // for statements whose every parameter is bound each time
  bool write_new_strings(uint32_t& written);
  bool write_new_python_frames(uint32_t count);  // trace_writer_python.cpp
  void bind_frame(size_t level, uintptr_t pc);   // trace_writer_python.cpp
  bool write_range_event(const EventRecord& e);
  bool insert_pool_usage(const EventRecord& e);
  bool write_allocator_sample(const EventRecord& e);  // trace_writer_allocator.cpp
  bool insert_pending_ranges();
  bool fail_with(const std::string& error);  // sets last_error_, returns false

  sqlite3* db_ = nullptr;
  DiskReserve disk_reserve_;  // held from create() to the stop reason or close()
  bool add_to_event_group(const EventRecord& e);
  bool flush_event_group();

  static constexpr size_t kEventsPerInsert = 64;
  sqlite3_stmt* insert_event_ = nullptr;
  sqlite3_stmt* insert_event_group_ = nullptr;       // kEventsPerInsert rows per step
  const EventRecord* group_[kEventsPerInsert] = {};  // the rows bound to insert_event_group_ so far
  int64_t group_types_[kEventsPerInsert] = {};       // and their event_types ids
  EventTypes types_;
  size_t grouped_events_ = 0;
  sqlite3_stmt* insert_failure_ = nullptr;
  sqlite3_stmt* insert_stack_ = nullptr;
  sqlite3_stmt* insert_frame_ = nullptr;
  sqlite3_stmt* insert_module_ = nullptr;
  sqlite3_stmt* upsert_meta_ = nullptr;
  sqlite3_stmt* insert_pool_usage_ = nullptr;
  sqlite3_stmt* insert_allocator_sample_ = nullptr;
  sqlite3_stmt* insert_string_ = nullptr;
  sqlite3_stmt* insert_range_ = nullptr;
  sqlite3_stmt* end_range_ = nullptr;
  sqlite3_stmt* insert_mark_ = nullptr;
  sqlite3_stmt* insert_python_frame_ = nullptr;
  uint32_t python_frames_written_ = 0;  // python_frames ids 1..python_frames_written_ are in this trace
  uint32_t strings_written_ = 0;        // ids 1..strings_written_ are in this trace (a forked child starts at 0)
  // Open start/end ranges: the nvtxRangeId_t the app holds -> ranges.id. The app ends such a range by the id
  // it was given (which may be another tool's, when chained), so the row is found here.
  std::unordered_map<uint64_t, uint64_t> open_start_end_ranges_;
  // Ranges begun in the batch being written, inserted at its end (with their end when it came in the batch).
  struct PendingRange {
    EventRecord begin;
    uint64_t end_ns;
    uint32_t end_thread_id;  // 0: still open
  };
  std::vector<PendingRange> pending_ranges_;
  std::unordered_map<uint64_t, size_t> pending_index_;  // ranges.id -> index in pending_ranges_
  std::unique_ptr<Aggregator> aggregator_;
  bool checkpoint_requested_ = false;
  std::string last_error_;
};

}  // namespace gmt::recorder
