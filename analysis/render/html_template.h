// The HTML report's page, internal to analysis/: render_html.cpp fills its three placeholders. The page is
// analysis/render/assets/report.html (inline CSS and script, nothing fetched from the network; the script reads the
// Report's JSON from the #gmt-report-data element and builds every plot and table with createElement and
// textContent, never innerHTML, so no name from the trace can become markup), embedded at build time
// (cmake/embed_text.cmake).
#pragma once

#include <string_view>

namespace gmt::analysis {

// Placeholders, each exactly once in the page, in this order.
inline constexpr std::string_view kHtmlTitleSlot = "@@GMT_TITLE@@";             // escaped text
inline constexpr std::string_view kHtmlHeaderSlot = "@@GMT_HEADER@@";           // markup built from escaped text
inline constexpr std::string_view kHtmlDataSlot = "@@GMT_DATA@@";               // JSON with '<', '>' and '&' as \u00XX
inline constexpr std::string_view kHtmlViewerDataSlot = "@@GMT_VIEWER@@";       // the same, for the viewer (or null)
inline constexpr std::string_view kHtmlD3Slot = "@@GMT_D3@@";                   // d3.min.js (assets/vendor)
inline constexpr std::string_view kHtmlViewerScriptSlot = "@@GMT_VIEWER_JS@@";  // assets/viewer.js
// The diff's page (assets/diff.html) has the title, header and d3 slots above and, between the header and d3, this.
inline constexpr std::string_view kHtmlDiffDataSlot = "@@GMT_DIFF_DATA@@";

std::string_view html_report_template();
std::string_view html_diff_template();
// The vendored d3 (assets/vendor/d3.min.js, BSD-3-Clause: assets/vendor/d3.LICENSE) and the viewer's script
// (assets/viewer.js: the interactive timeline, stack panel, flamegraph, segment map and findings panel).
std::string_view d3_script();
std::string_view viewer_script();

}  // namespace gmt::analysis
