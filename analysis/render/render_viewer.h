// The interactive HTML page's data besides the Report (render_viewer.cpp), internal to the HTML renderer.
#pragma once

#include <nlohmann/json.hpp>

#include "analysis/model/report.h"
#include "analysis/model/viewer_data.h"
#include "analysis/render/render.h"

namespace gmt::analysis {

// { duration_ns, bucket_ns, layers: [{device, stacks, bytes, other}], allocations: {columns, rows, total, not_shown,
//   not_shown_bytes, per_window, window_ns}, flame: {peak, leaked, allocated, allocated_other_bytes},
//   heap_moments: [{label, time_ns, segments: [{device, address, size, type, blocks: [[offset, size, allocated,
//   stack]]}], blocks_left_out}], stacks: {id: {user, lines, frames}} }
nlohmann::ordered_json viewer_json(const Report& report, const ViewerData& data, const RenderOptions& options);

}  // namespace gmt::analysis
