// Renderers: a Report (model.h) as text for a person or as JSON for scripts. They only format; every number
// comes from the Report, so text and JSON always agree.
#pragma once

#include <cstddef>
#include <string>

#include "analysis/model.h"

namespace gmt::analysis {

struct RenderOptions {
  // Leak groups shown, largest first; the rest are summarized in one line (text) or counted (JSON). The
  // model keeps every group so that this cut is the renderer's alone.
  size_t top = 10;
  // Frames shown per stack in the text report (0: all). JSON always carries every frame.
  size_t max_frames = 16;
};

// The report for a terminal: header, totals, peak, leaks by call stack, failed allocations.
std::string render_text(const Report& report, const RenderOptions& options = {});

// The same report as a JSON document (pretty printed, indent 2, trailing newline). Shape, with every
// field always present (null where unknown):
//   trace:  path, pid, command_line, hostname, backend, tool_version, schema_version, duration_ns,
//           duration_from_events, complete, simulated, symbolized, dropped_events, event_count
//   totals: allocations, allocated_bytes, frees, failed_allocations, leaked_bytes, leaked_allocations,
//           peak_bytes, peak_time_ns, unmatched_frees, inconsistencies
//   peak_by_kind, peak_time_ns_by_kind, leaked_by_kind: {device, managed, host_pinned}
//   leak_groups: {total, shown, not_shown, below_min_bytes, bytes_below_min_bytes, min_bytes}
//   leaks[]: rank, bytes, count, stack_id, stack_missing, memory_kinds[], apis[], devices[],
//            first_alloc_ns, last_alloc_ns, stack[]
//   failures[]: event_id, time_ns, api, memory_kind, requested_bytes, error, error_name, device,
//               device_free, device_total, stack_id, stack_missing, stack[]
//   stack[]: level, pc ("0x..."), function, file, line, module (full path)
std::string render_json(const Report& report, const RenderOptions& options = {});

}  // namespace gmt::analysis
