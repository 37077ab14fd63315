#include "analysis/model/filters.h"

#include <fmt/core.h>

#include "analysis/format.h"
#include "analysis/model/ranges.h"
#include "analysis/read/events.h"
#include "schema/trace_schema.h"

namespace gmt::analysis {
namespace {

using schema::EventKind;

std::string seconds(int64_t ns) { return fmt::format("{:g}", static_cast<double>(ns) / 1e9); }

std::string device_list(const std::set<int64_t>& devices) {
  std::string list;
  for (int64_t device : devices) list += (list.empty() ? "" : ", ") + std::to_string(device);
  return list;
}

}  // namespace

std::string describe_filters(const EventFilters& filters) {
  std::string text;
  auto add = [&text](const std::string& option) { text += (text.empty() ? "" : " ") + option; };
  if (filters.pid) add(fmt::format("--pid {}", *filters.pid));
  if (filters.device) add(fmt::format("--device {}", *filters.device));
  if (filters.since_ns) {
    add(filters.since_snapshot ? fmt::format("--since {} ({} s)", *filters.since_snapshot, seconds(*filters.since_ns))
                               : "--since " + seconds(*filters.since_ns));
  }
  if (filters.until_ns) {
    add(filters.until_snapshot ? fmt::format("--at {} ({} s)", *filters.until_snapshot, seconds(*filters.until_ns))
                               : "--until " + seconds(*filters.until_ns));
  }
  if (filters.min_size) add(fmt::format("--min-size {}", *filters.min_size));
  if (filters.range) add("--range '" + *filters.range + "'");
  return text;
}

int64_t trace_origin(const TraceFile& trace) {
  if (auto start = trace.meta_int(schema::meta::kStartMonotonicNs)) return *start;
  return first_event_time(trace).value_or(0);
}

EventFilter::EventFilter(const TraceFile& trace, const EventFilters& filters, std::optional<int64_t> trace_pid,
                         const RangeTracker* ranges)
    : filters_(filters), active_(filters.any()), trace_pid_(trace_pid), ranges_(ranges) {
  pid_matches_ = !filters.pid || filters.pid == trace_pid;
  if (filters.since_ns || filters.until_ns) {
    const int64_t origin = trace_origin(trace);
    since_abs_ = filters.since_ns ? origin + *filters.since_ns : INT64_MIN;
    until_abs_ = filters.until_ns ? origin + *filters.until_ns : INT64_MAX;
  } else {
    since_abs_ = INT64_MIN;
    until_abs_ = INT64_MAX;
  }
}

bool EventFilter::accept_allocation(int64_t time_ns, int64_t thread_id, int64_t device, int64_t size, bool counted) {
  const bool device_ok = !filters_.device || device == *filters_.device;
  const bool time_ok = time_ns >= since_abs_ && time_ns <= until_abs_;
  const bool size_ok = !filters_.min_size || (size >= 0 && static_cast<uint64_t>(size) >= *filters_.min_size);
  const bool range_ok = !filters_.range || (ranges_ && ranges_->inside_named(thread_id));
  const bool ok = pid_matches_ && device_ok && time_ok && size_ok && range_ok;
  if (!counted) return ok;
  ++seen_;
  devices_seen_.insert(device);
  if (size > 0) largest_size_ = std::max(largest_size_, static_cast<uint64_t>(size));
  device_ok_ += device_ok;
  time_ok_ += time_ok;
  size_ok_ += size_ok;
  range_ok_ += range_ok;
  matched_ += ok;
  return ok;
}

bool EventFilter::accept(int64_t kind, int64_t time_ns, int64_t thread_id, int64_t device, uint64_t address,
                         int64_t size, uint64_t handle, bool imported) {
  if (!pid_matches_) {
    if ((kind == static_cast<int64_t>(EventKind::Alloc) && !imported) ||
        kind == static_cast<int64_t>(EventKind::AllocFailed) || kind == static_cast<int64_t>(EventKind::VmmCreate)) {
      ++seen_;
    }
    return false;
  }
  switch (static_cast<EventKind>(kind)) {
    case EventKind::Alloc: {
      const bool ok = accept_allocation(time_ns, thread_id, device, size, /*counted=*/!imported);
      if (ok) {
        left_out_addresses_.erase(address);
      } else if (address != 0) {
        left_out_addresses_.insert(address);
      }
      return ok;
    }
    case EventKind::AllocFailed: return accept_allocation(time_ns, thread_id, device, size);
    case EventKind::VmmCreate: {
      const bool ok = accept_allocation(time_ns, thread_id, device, size);
      if (ok) {
        left_out_handles_.erase(handle);
      } else {
        left_out_handles_.insert(handle);
      }
      return ok;
    }
    case EventKind::VmmMap: {
      // A mapping follows its physical memory; its unmap follows the mapping.
      const bool ok = time_ns <= until_abs_ && !left_out_handles_.count(handle);
      if (ok) {
        left_out_addresses_.erase(address);
      } else {
        left_out_addresses_.insert(address);
      }
      return ok;
    }
    case EventKind::Free:
    case EventKind::VmmUnmap:
      if (left_out_addresses_.erase(address) > 0) return false;
      return time_ns <= until_abs_;
    case EventKind::VmmRelease:
      if (left_out_handles_.erase(handle) > 0) return false;
      return time_ns <= until_abs_;
    default: return time_ns >= since_abs_ && time_ns <= until_abs_;
  }
}

FilterSummary EventFilter::finish(int64_t duration_ns, uint64_t allocations) const {
  FilterSummary summary;
  summary.filters = filters_;
  summary.allocations_seen = active_ ? seen_ : allocations;
  summary.allocations_matched = active_ ? matched_ : allocations;
  if (!active_ || matched_ > 0) return summary;
  std::string& line = summary.nothing_matched;
  if (!pid_matches_) {
    line = trace_pid_
               ? fmt::format("--pid {} matches nothing: the trace is of process {}", *filters_.pid, *trace_pid_)
               : fmt::format("--pid {} matches nothing: the trace does not record its process id", *filters_.pid);
  } else if (filters_.range && (!ranges_ || !ranges_->has_table() || !ranges_->has_ranges())) {
    line = fmt::format("--range '{}' matches nothing: the trace has no NVTX ranges", *filters_.range);
  } else if (filters_.range && !ranges_->has_named_range()) {
    line = fmt::format("--range '{}' matches nothing: the trace has no NVTX range of that name", *filters_.range);
  } else if (seen_ == 0) {
    line = fmt::format("{} matches nothing: the trace has no allocations", describe_filters(filters_));
  } else if (filters_.device && device_ok_ == 0) {
    line = fmt::format("--device {} matches nothing: the trace allocates on device(s) {} only", *filters_.device,
                       device_list(devices_seen_));
  } else if ((filters_.since_ns || filters_.until_ns) && time_ok_ == 0) {
    EventFilters window;
    window.since_ns = filters_.since_ns;
    window.until_ns = filters_.until_ns;
    line = fmt::format("{} matches nothing: no allocation in that time window (the trace lasts {})",
                       describe_filters(window), format_duration(duration_ns));
  } else if (filters_.min_size && size_ok_ == 0) {
    line = fmt::format("--min-size {} matches nothing: the largest allocation is {}", *filters_.min_size,
                       format_bytes_exact(largest_size_));
  } else if (filters_.range && range_ok_ == 0) {
    line = fmt::format("--range '{}' matches nothing: no allocation was made inside a range of that name",
                       *filters_.range);
  } else {
    line = fmt::format("{} match nothing together: each matches some allocations, but none matches all",
                       describe_filters(filters_));
  }
  return summary;
}

}  // namespace gmt::analysis
