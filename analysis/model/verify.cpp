#include "analysis/model/verify.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <tuple>

namespace gmt::analysis {
namespace {

// What must be equal for two events to be the two backends' records of one call.
bool same_call(const CheckedEvent& a, const CheckedEvent& b) {
  return a.thread_id == b.thread_id && a.kind == b.kind && a.memory_kind == b.memory_kind && a.address == b.address &&
         a.size == b.size && a.handle == b.handle;
}

// Recorded at the call's entry, before the real call runs (recorder/driver_events.h): the driver wrapper's record
// comes first, CUPTI's (its API_ENTER callback, inside the real call) second. Everything else is recorded at the
// call's exit: CUPTI's API_EXIT callback first, the wrapper's record after the real call returned.
bool recorded_at_entry(int64_t kind) {
  using schema::EventKind;
  for (EventKind entry : {EventKind::Free, EventKind::PoolDestroy, EventKind::VmmAddressFree, EventKind::VmmRelease,
                          EventKind::VmmUnmap}) {
    if (kind == static_cast<int64_t>(entry)) return true;
  }
  return false;
}

bool is_first_record(const CheckedEvent& e) {
  return (e.source == static_cast<int64_t>(schema::Source::Cupti)) != recorded_at_entry(e.kind);
}

schema::EventKind event_kind_from_code(int64_t code) {
  return code >= 1 && code <= schema::kMaxEventKind ? static_cast<schema::EventKind>(code) : schema::EventKind::Alloc;
}

// Codes outside the enums (a damaged trace) read as unknown rather than as values to_string cannot name.
schema::Api api_from_code(int64_t code) {
  return code >= 0 && code <= schema::kMaxApi ? static_cast<schema::Api>(code) : schema::Api::Unknown;
}

schema::MemoryKind memory_kind_from_code(int64_t code) {
  return code >= 0 && code <= schema::kMaxMemoryKind ? static_cast<schema::MemoryKind>(code) : schema::MemoryKind::None;
}

int64_t lenient_int(const std::optional<std::string>& text, int64_t fallback) {
  if (!text) return fallback;
  int64_t value = 0;
  auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
  return error == std::errc() && end == text->data() + text->size() ? value : fallback;
}

void group_unmatched(CrossCheck& check, const std::vector<CheckedEvent>& unmatched, int64_t origin_ns,
                     const std::function<const Stack&(int64_t)>& load_stack) {
  using GroupKey = std::tuple<bool, int64_t, int64_t, int64_t, int64_t>;  // counting, kind, api, memory kind, stack
  std::map<GroupKey, Disagreement> groups;
  for (const CheckedEvent& e : unmatched) {
    (e.counting ? check.only_counting : check.only_checking) += 1;
    Disagreement& group = groups[{!e.counting, e.kind, e.api, e.memory_kind, e.stack_id}];
    if (group.count == 0) {
      group.seen_by_counting = e.counting;
      group.kind = event_kind_from_code(e.kind);
      group.api = api_from_code(e.api);
      group.memory_kind = memory_kind_from_code(e.memory_kind);
      group.first_time_ns = static_cast<int64_t>(static_cast<uint64_t>(e.time_ns) - static_cast<uint64_t>(origin_ns));
      group.stack.id = e.stack_id;
    }
    ++group.count;
    group.bytes += e.size;
    if (group.event_ids.size() < kMaxEventIdsPerGroup) group.event_ids.push_back(e.id);
  }
  for (auto& [key, group] : groups) {
    group.stack = load_stack(group.stack.id);
    check.groups.push_back(std::move(group));
  }
  std::stable_sort(check.groups.begin(), check.groups.end(), [](const Disagreement& a, const Disagreement& b) {
    return a.count != b.count ? a.count > b.count : a.event_ids.front() < b.event_ids.front();
  });
}

}  // namespace

MatchResult match_events(const std::vector<CheckedEvent>& events) {
  MatchResult result;
  std::vector<bool> paired(events.size(), false);
  // Per thread, its last record when that is a first record still waiting for its second one.
  std::map<int64_t, size_t> waiting;
  for (size_t i = 0; i < events.size(); ++i) {
    const CheckedEvent& e = events[i];
    auto slot = waiting.find(e.thread_id);
    if (slot != waiting.end()) {
      const CheckedEvent& first = events[slot->second];
      const bool partner = !is_first_record(e) && first.source != e.source && same_call(first, e);
      if (partner) {
        paired[slot->second] = paired[i] = true;
        ++result.matched;
        if (first.api != e.api) ++result.named_differently;
        if (first.device != e.device) ++result.on_other_device;
      }
      waiting.erase(slot);  // paired, or its second record never came: unpaired for good
      if (partner) continue;
    }
    if (is_first_record(e)) waiting.emplace(e.thread_id, i);
  }
  for (size_t i = 0; i < events.size(); ++i) {
    if (!paired[i]) result.unmatched.push_back(events[i]);
  }
  return result;
}

bool has_cross_check(const TraceFile& trace) {
  return trace.meta(schema::meta::kVerifyBackend).has_value() ||
         trace.meta(schema::meta::kVerifyUnavailable).has_value();
}

CrossCheck cross_check_trace(const TraceFile& trace, const std::function<const Stack&(int64_t)>& load_stack) {
  CrossCheck check;
  check.counting_backend = trace.meta(schema::meta::kBackend).value_or("");
  check.unavailable = trace.meta(schema::meta::kVerifyUnavailable);
  const std::optional<std::string> checking_name = trace.meta(schema::meta::kVerifyBackend);
  const std::optional<schema::Source> counting = source_of_backend(check.counting_backend);
  const std::optional<schema::Source> checking = source_of_backend(checking_name);
  if (!checking_name) return check;  // --verify was asked, and the cross-check could not start (unavailable)
  if (!counting || !checking || *counting == *checking) {
    check.unavailable = "the trace names no two distinct backends to compare (meta backend '" + check.counting_backend +
                        "', verify_backend '" + *checking_name + "')";
    return check;
  }
  check.checking_backend = *checking_name;
  const std::vector<CheckedEvent> events = read_backend_events(trace, *counting, *checking);
  for (const CheckedEvent& e : events) (e.counting ? check.counting_events : check.checking_events) += 1;
  MatchResult result = match_events(events);
  check.matched = result.matched;
  check.named_differently = result.named_differently;
  check.on_other_device = result.on_other_device;
  const int64_t first_time = events.empty() ? 0 : events.front().time_ns;
  const int64_t origin = lenient_int(trace.meta(schema::meta::kStartMonotonicNs), first_time);
  group_unmatched(check, result.unmatched, origin, load_stack);
  return check;
}

}  // namespace gmt::analysis
