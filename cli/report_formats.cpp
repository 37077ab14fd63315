#include "cli/report_formats.h"

#include "analysis/render/render_export.h"

namespace gmt::cli {

const std::vector<std::string>& report_formats() {
  static const std::vector<std::string> formats = {"text", "json", "html", "perfetto", "folded"};
  return formats;
}

const std::vector<std::string>& folded_weights() {
  static const std::vector<std::string> weights = {"leaks", "peak"};
  return weights;
}

std::string render_report(const analysis::Report& report, const std::string& format,
                          const analysis::RenderOptions& options, const std::string& folded_of) {
  if (format == "json") return analysis::render_json(report, options);
  if (format == "html") return analysis::render_html(report, options);
  if (format == "perfetto") return analysis::render_perfetto(report, options);
  if (format == "folded") {
    return analysis::render_folded(report, folded_of == "peak" ? analysis::FoldedOf::Peak : analysis::FoldedOf::Leaks);
  }
  return analysis::render_text(report, options);
}

}  // namespace gmt::cli
