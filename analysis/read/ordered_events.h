// Reading a trace's events in time order without asking SQLite to sort them.
//
// Events are stored in writing order (events.id), which is time order in every trace with meta
// events_time_ordered = 1 (the recorder merges its threads' events by time), and almost time order in older
// ones: there a hook read the clock just before it took the recorder's lock, so two threads could swap places
// only by the few events recorded while one of them was between the two. `ORDER BY time_ns, id` made SQLite sort every
// event anyway, through temporary files: three quarters of `report`'s time (docs/benchmarks.md). OrderedEvents scans
// the table in id order (no sort) and puts each row in place inside a bounded window of rows not yet handed out, which
// costs a few moves per event on such input. A row that belongs before one already handed out (the window
// was too small, or the trace was written by hand in any order) raises EventsOutOfOrder; the caller then
// analyzes again with EventOrder::SortedBySqlite, which is always exact.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/read/trace_file.h"

namespace gmt::analysis {

enum class EventOrder {
  RecordingWindow,  // scan by id, reorder within the window; may raise EventsOutOfOrder
  SortedBySqlite,   // ORDER BY time_ns, id: exact for any trace, slower
};

// The windows analyze_trace tries, in turn, before EventOrder::SortedBySqlite: the first fits every trace
// measured so far; the second costs ~450 MiB, still inside the 1 GiB budget of `report`.
inline constexpr size_t kEventWindows[] = {size_t{1} << 20, size_t{1} << 22};
// For traces with meta.events_time_ordered = 1, whose rows need no reordering at all.
inline constexpr size_t kSmallEventWindow = 4096;

class EventsOutOfOrder : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Rows of `select`, a SELECT over `events e` (and joins) without ORDER BY, whose column 0 is e.id and
// column 1 e.time_ns; every column is read as an integer (NULL kept as such). Rows come out ordered by
// (time_ns, id), like `ORDER BY e.time_ns, e.id`. Same accessors as Statement.
class OrderedEvents {
 public:
  // `window`: rows held back at most (a row can move ahead of up to window - 1 rows recorded before it),
  // window * (columns + 1) * 8 bytes of memory (for 13 columns: 112 MiB
  // per million rows). Measured on a loaded 2-core machine, a thread stalled between its clock read and the
  // lock for 76-214 ms, during which 130k-170k events were recorded by others.
  OrderedEvents(const TraceFile& trace, const std::string& select, EventOrder order, size_t window);

  bool step();
  int64_t column_int(int index) const { return values_[current_ * columns_ + static_cast<size_t>(index)]; }
  bool column_is_null(int index) const { return (nulls_[current_] >> index) & 1u; }

 private:
  uint32_t take_slot();
  void read_row_into(uint32_t slot);
  bool before(uint32_t a, uint32_t b) const;  // row a sorts before row b

  Statement rows_;
  EventOrder order_;
  size_t window_;
  size_t columns_ = 0;
  bool source_done_ = false;
  std::vector<int64_t> values_;  // slot * columns_ + column
  std::vector<uint64_t> nulls_;  // per slot: bit c set when column c is NULL
  std::vector<uint32_t> free_slots_;
  std::deque<uint32_t> pending_;  // slots not handed out yet, sorted by (time, id)
  uint32_t current_ = 0;
  bool has_current_ = false;
  bool emitted_any_ = false;
  int64_t last_time_ = 0;  // of the last row handed out
};

}  // namespace gmt::analysis
