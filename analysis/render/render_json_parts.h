// Parts of the JSON report built outside render_json.cpp (internal to analysis/).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "analysis/model/report.h"

namespace gmt::analysis {

// A value, or null when absent: every optional figure of the JSON report.
template <typename T>
nlohmann::ordered_json optional_value(const std::optional<T>& value) {
  return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(nullptr);
}

// A stack's frames as every stack[] of the report (render_json.cpp).
nlohmann::ordered_json call_stack_json(const Stack& stack);

// devices[]: ordinal, name, uuid, total_bytes, pci_bus_id (null where not recorded); [] before schema v6.
nlohmann::ordered_json devices_json(const std::vector<DeviceInfo>& devices);
// imported: opens, closes, peak_bytes, peak_time_ns, devices[] (device, peak_bytes, peak_time_ns, opens,
// open_at_end_bytes), left_open_handles, left_open_bytes, left_open[] (bytes, count, apis[], devices[],
// stack_id, stack_ids, stack_missing, stack[]). render_json_imported.cpp.
nlohmann::ordered_json imported_json(const ImportedMemory& imported);
// cross_check: null unless run --verify; else ran, counting_backend, checking_backend, unavailable, counting_events,
// checking_events, matched, named_differently, on_other_device, disagreements, only_counting, only_checking,
// groups[] (seen_by, missed_by, kind, api, memory_kind, count, bytes, first_time_ns, event_ids[], stack_id,
// stack_missing, stack[]). render_verify.cpp.
nlohmann::ordered_json cross_check_json(const Report& report);
// aggregate: null for a full trace; else window_ns, windows, events_seen, events_kept, synchronize_events,
// failures_with_context, failures_without_context, note (render_aggregate.cpp).
nlohmann::ordered_json aggregate_json(const Report& report);

// Shared by the JSON report's files (render_json.cpp).
// Beside every stack[]: user_frame and stack_view, the stack as the text report shows it (stack_view.h).
void add_stack_view(nlohmann::ordered_json& item, const Stack& stack);
nlohmann::ordered_json optional_text(const std::string& text);  // null for ""
// fragmentation: the address-space layout at one moment, or null.
nlohmann::ordered_json fragmentation_json(const std::optional<FragmentationStats>& stats);

// The memory layouts (render_json_heaps.cpp): fragmentation[], heap_fragmentation[], pools (null without the
// pool_usage table), cached_at_exit, and a heap's space at one moment (null when absent).
nlohmann::ordered_json device_fragmentation_json(const std::vector<DeviceFragmentation>& devices);
nlohmann::ordered_json heap_fragmentation_json(const std::vector<HeapFragmentation>& heaps);
nlohmann::ordered_json pools_json(const std::optional<std::vector<PoolUsage>>& pools);
nlohmann::ordered_json cached_at_exit_json(const Report& report);
nlohmann::ordered_json heap_space_json(const std::optional<HeapSpace>& space);

}  // namespace gmt::analysis
