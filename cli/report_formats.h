// The output formats of `gpumemtrace report`, kept apart from the command's options so that a new format
// touches one place.
#pragma once

#include <string>
#include <vector>

#include "analysis/model/filters.h"
#include "analysis/model/report.h"
#include "analysis/read/trace_file.h"
#include "analysis/render/render.h"

namespace gmt::cli {

// text, json, html, perfetto, folded, memory-viz.
const std::vector<std::string>& report_formats();

// What `--folded-of` accepts: leaks (bytes live at the end), peak (bytes live at each device's peak).
const std::vector<std::string>& folded_weights();

// Whether the format ships single allocations, read from the trace in a pass of its own (analysis/model/lifetimes.h)
// besides the Report: memory-viz, perfetto, html.
bool format_reads_allocations(const std::string& format);

// The report in `format` (one of report_formats(); `folded_of` matters for "folded" only). `trace` (open when
// format_reads_allocations, else nullptr) and `filters` are read by the formats that ship single allocations.
std::string render_report(const analysis::Report& report, const std::string& format,
                          const analysis::RenderOptions& options, const std::string& folded_of,
                          const analysis::TraceFile* trace, const analysis::EventFilters& filters);

}  // namespace gmt::cli
