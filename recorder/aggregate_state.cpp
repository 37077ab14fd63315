#include "recorder/aggregate_state.h"

#include <algorithm>

#include "schema/aggregate_schema.h"

namespace gmt::recorder {

void AggregateWindows::level_changed(uint32_t window, int level, int16_t device, int64_t before, int64_t value) {
  auto [it, inserted] = levels.try_emplace(level_key(window, level, device));
  AggregateLevelCell& c = it->second;
  if (inserted) c.low = c.high = before;  // the level carried into the window
  c.low = std::min(c.low, value);
  c.high = std::max(c.high, value);
  c.end = value;
  c.dirty = true;
}

void AggregateWindows::merge_pairs() {
  std::unordered_map<AggregateWindowKey, AggregateWindowCell, AggregateWindowKeyHash> merged_cells;
  for (auto& [key, cell] : cells) {
    AggregateWindowKey k = key;
    k.window /= 2;
    AggregateWindowCell& m = merged_cells[k];
    m.allocs += cell.allocs;
    m.alloc_bytes += cell.alloc_bytes;
    m.frees += cell.frees;
    m.free_bytes += cell.free_bytes;
    m.dirty = true;
  }
  cells.swap(merged_cells);
  // Lows and highs: the extreme of the two; the end: the later window's (the odd one, where it exists).
  std::unordered_map<uint64_t, AggregateLevelCell> merged_levels;
  for (const auto& [key, cell] : levels) {
    const uint32_t window = static_cast<uint32_t>(key >> 32);
    const uint64_t k = (uint64_t{window / 2} << 32) | (key & 0xffffffffull);
    auto [it, inserted] = merged_levels.try_emplace(k, cell);
    AggregateLevelCell& m = it->second;
    if (!inserted) {
      m.low = std::min(m.low, cell.low);
      m.high = std::max(m.high, cell.high);
      const bool later = window % 2 == 1;
      if (later) m.end = cell.end;
    }
    m.dirty = true;
  }
  levels.swap(merged_levels);
  std::unordered_map<uint64_t, AggregateRangeCell> merged_ranges;
  for (const auto& [key, cell] : ranges) {
    // ranges keys: window in the top 16 bits, then domain (24) and name (24) string ids.
    const uint64_t window = key >> 48;
    const uint64_t k = ((window / 2) << 48) | (key & 0xffffffffffffull);
    AggregateRangeCell& m = merged_ranges[k];
    m.repetitions += cell.repetitions;
    m.total_ns += cell.total_ns;
    m.max_ns = std::max(m.max_ns, cell.max_ns);
    m.dirty = true;
  }
  ranges.swap(merged_ranges);
}

uint32_t AggregateRanges::key_of(uint32_t domain_id, uint32_t name_id) {
  const uint64_t packed = uint64_t{domain_id} << 32 | name_id;
  auto [it, inserted] = name_index.try_emplace(packed, static_cast<uint32_t>(names.size()));
  if (inserted) {
    Name n;
    n.domain_id = domain_id;
    n.name_id = name_id;
    names.push_back(n);
  }
  return it->second;
}

uint8_t AggregateRanges::inside(uint32_t thread_id, uint32_t* keys) const {
  uint8_t count = 0;
  auto add = [&](uint64_t row_id) {
    auto it = open.find(row_id);
    if (it == open.end() || count == kMaxRangesPerAllocation) return;
    for (uint8_t i = 0; i < count; ++i) {
      if (keys[i] == it->second.key) return;  // a name counts once, however deep it nests
    }
    keys[count++] = it->second.key;
  };
  if (auto t = open_on_thread.find(thread_id); t != open_on_thread.end()) {
    for (auto r = t->second.rbegin(); r != t->second.rend(); ++r) add(*r);
  }
  for (auto r = open_start_end.rbegin(); r != open_start_end.rend(); ++r) add(*r);
  return count;
}

void AggregateRanges::end(uint32_t key, uint64_t end_ns) {
  Name& n = names[key];
  const uint64_t index = n.ends++;
  if (index % n.stride != 0) return;
  n.series.emplace_back(end_ns, n.live_inside);
  if (n.series.size() > static_cast<size_t>(schema::aggregate::kMaxRangeEndsKept)) {
    // Keep every other kept end (those at multiples of the doubled stride): the series stays uniform in repetitions.
    size_t out = 0;
    for (size_t i = 0; i < n.series.size(); i += 2) n.series[out++] = n.series[i];
    n.series.resize(out);
    n.stride *= 2;
    n.rewrite = true;
    n.written = 0;
  }
  dirty_names.push_back(key);
}

}  // namespace gmt::recorder
