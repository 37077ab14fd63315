#include "analysis/read/ordered_events.h"

#include <algorithm>

namespace gmt::analysis {
namespace {

constexpr int kIdColumn = 0;
constexpr int kTimeColumn = 1;

std::string with_order(const std::string& select, EventOrder order) {
  return select + (order == EventOrder::SortedBySqlite ? " ORDER BY e.time_ns, e.id" : " ORDER BY e.id");
}

}  // namespace

OrderedEvents::OrderedEvents(const TraceFile& trace, const std::string& select, EventOrder order, size_t window)
    : rows_(trace, with_order(select, order).c_str()),
      order_(order),
      window_(order == EventOrder::SortedBySqlite ? 1 : std::max<size_t>(window, 1)) {
  columns_ = static_cast<size_t>(rows_.column_count());
  if (columns_ > 64) throw TraceError("internal error: an events query with more than 64 columns");
}

// Slots are made as rows arrive (at most window + 2: the rows held back, the one handed out, the one being
// read), so a small trace never pays for a large window.
uint32_t OrderedEvents::take_slot() {
  if (!free_slots_.empty()) {
    uint32_t slot = free_slots_.back();
    free_slots_.pop_back();
    return slot;
  }
  uint32_t slot = static_cast<uint32_t>(nulls_.size());
  nulls_.push_back(0);
  values_.resize(values_.size() + columns_);
  return slot;
}

void OrderedEvents::read_row_into(uint32_t slot) {
  int64_t* values = &values_[slot * columns_];
  uint64_t nulls = 0;
  for (size_t c = 0; c < columns_; ++c) {
    int column = static_cast<int>(c);
    values[c] = rows_.column_int(column);
    // NULL reads as 0: only a 0 needs the (second) call that tells them apart.
    if (values[c] == 0 && rows_.column_is_null(column)) nulls |= uint64_t{1} << c;
  }
  nulls_[slot] = nulls;
}

bool OrderedEvents::before(uint32_t a, uint32_t b) const {
  int64_t time_a = values_[a * columns_ + kTimeColumn], time_b = values_[b * columns_ + kTimeColumn];
  if (time_a != time_b) return time_a < time_b;
  return values_[a * columns_ + kIdColumn] < values_[b * columns_ + kIdColumn];
}

bool OrderedEvents::step() {
  if (has_current_) free_slots_.push_back(current_);
  has_current_ = false;
  while (!source_done_ && pending_.size() < window_) {
    if (!rows_.step()) {
      source_done_ = true;
      break;
    }
    uint32_t slot = take_slot();
    read_row_into(slot);
    if (emitted_any_ && values_[slot * columns_ + kTimeColumn] < last_time_) {
      throw EventsOutOfOrder("an event is out of time order by more than the reading window");
    }
    // Nearly sorted input: the place is at or near the back.
    auto place = pending_.end();
    while (place != pending_.begin() && before(slot, *(place - 1))) --place;
    pending_.insert(place, slot);
  }
  if (pending_.empty()) return false;
  current_ = pending_.front();
  pending_.pop_front();
  has_current_ = true;
  emitted_any_ = true;
  last_time_ = values_[current_ * columns_ + kTimeColumn];
  return true;
}

}  // namespace gmt::analysis
