// The report's CI sections, internal to analysis/: suppressed leaks and the breakdowns by thread, stream and
// module (render_ci.cpp), called by the text and JSON renderers in their order.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "analysis/model/report.h"

namespace gmt::analysis {

// Rows per breakdown in the text report; the JSON report has them all.
inline constexpr size_t kTextBreakdownRows = 5;

// "Suppressed leaks": each rule with what it matched, unused rules flagged. Nothing without rules.
void append_suppressed(std::string& out, const Report& report);
// "Breakdown": short tables by thread, stream and module. Nothing when nothing was allocated.
void append_breakdown(std::string& out, const Report& report);

// suppressed[]: rule, origin, bytes, count, groups, used
nlohmann::ordered_json suppressed_json(const Report& report);
// breakdown: {by_thread[]: thread, by_stream[]: stream ("0x..."), by_module[]: module, path, label; each with
//             allocations, allocated_bytes, leaked_bytes, peak_bytes}
nlohmann::ordered_json breakdown_json(const Breakdown& breakdown);

}  // namespace gmt::analysis
