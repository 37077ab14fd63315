// The JSON report's "allocator_stats" part (render_json_allocators.cpp), internal to analysis/.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <vector>

#include "analysis/model/report.h"

namespace gmt::analysis {

// null when the trace has no allocator_stats table. `stacks` renders a held{} list as render_json does.
nlohmann::ordered_json allocator_stats_json(
    const Report& report, const std::function<nlohmann::ordered_json(const std::vector<StackBytes>&)>& stacks);

}  // namespace gmt::analysis
