// The output formats of `gpumemtrace report`, kept apart from the command's options so that a new format
// touches one place.
#pragma once

#include <string>
#include <vector>

#include "analysis/model/report.h"
#include "analysis/render/render.h"

namespace gmt::cli {

// text, json, html, perfetto, folded.
const std::vector<std::string>& report_formats();

// What `--folded-of` accepts: leaks (bytes live at the end), peak (bytes live at each device's peak).
const std::vector<std::string>& folded_weights();

// The report in `format` (one of report_formats(); `folded_of` matters for "folded" only).
std::string render_report(const analysis::Report& report, const std::string& format,
                          const analysis::RenderOptions& options, const std::string& folded_of);

}  // namespace gmt::cli
