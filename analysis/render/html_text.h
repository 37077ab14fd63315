// Text put into the HTML pages (render_html.cpp: the report; render_diff_html.cpp: the diff), internal to
// analysis/render: escaped markup, JSON that cannot end its <script> element, and inlined scripts checked for it.
#pragma once

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace gmt::analysis {

// For text and for attribute values in double or single quotes.
inline std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// JSON inside <script>: the HTML parser ends the element at "</script" and treats "<!--" specially, and
// neither can be escaped in HTML there. '<', '>' and '&' only occur inside JSON strings, where \u003c
// and friends mean the same characters to JSON.parse.
inline std::string script_safe_json(const std::string& json) {
  std::string out;
  out.reserve(json.size() + json.size() / 16);
  for (char c : json) {
    switch (c) {
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default: out += c;
    }
  }
  return out;
}

// "</script" cannot occur in an inlined script (d3.min.js, viewer.js; checked here, so that a new version that has it
// fails loudly): the HTML parser would end its <script> element there.
inline std::string_view script_text(std::string_view script) {
  if (script.find("</script") != std::string_view::npos || script.find("</SCRIPT") != std::string_view::npos) {
    throw std::logic_error("an inlined script of the HTML page contains </script");
  }
  return script;
}

// The page with each slot replaced by its text. The slots are found in the order given, each after the previous one, so
// text put into one slot is never searched for the next.
inline std::string fill_html_slots(std::string_view page,
                                   std::initializer_list<std::pair<std::string_view, std::string_view>> slots) {
  size_t size = page.size();
  for (const auto& slot : slots) size += slot.second.size();
  std::string out;
  out.reserve(size);
  size_t at = 0;
  for (const auto& [slot, text] : slots) {
    const size_t found = page.find(slot, at);
    out += page.substr(at, found - at);
    out += text;
    at = found + slot.size();
  }
  out += page.substr(at);
  return out;
}

}  // namespace gmt::analysis
