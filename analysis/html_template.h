// The HTML report's page (html_template.cpp), internal to analysis/: render_html.cpp fills its three
// placeholders. Kept apart so that the CSS and the script read as one piece.
#pragma once

#include <string_view>

namespace gmt::analysis {

// Placeholders, each exactly once in the page, in this order.
inline constexpr std::string_view kHtmlTitleSlot = "@@GMT_TITLE@@";    // escaped text
inline constexpr std::string_view kHtmlHeaderSlot = "@@GMT_HEADER@@";  // markup built from escaped text
inline constexpr std::string_view kHtmlDataSlot = "@@GMT_DATA@@";      // JSON with '<', '>' and '&' as \u00XX

std::string_view html_report_template();

}  // namespace gmt::analysis
