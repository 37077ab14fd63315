#include "cli/merged_report.h"

#include <fmt/core.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>

#include "analysis/model/merge.h"
#include "analysis/read/trace_file.h"
#include "cli/exit_codes.h"

namespace gmt::cli {
namespace {

bool is_directory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool write_text(const std::string& text, const std::string& output_path) {
  if (output_path.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return true;
  }
  std::ofstream out(output_path, std::ios::binary | std::ios::trunc);
  if (out) out << text;
  out.close();
  if (!out) fmt::print(stderr, "gpumemtrace: cannot write the report to '{}'\n", output_path);
  return static_cast<bool>(out);
}

}  // namespace

bool wants_merged_report(const std::vector<std::string>& inputs) {
  return inputs.size() > 1 || (inputs.size() == 1 && is_directory(inputs[0]));
}

int run_merged_report(const MergedReportOptions& options) {
  std::vector<std::string> paths;
  for (const std::string& input : options.inputs) {
    if (!is_directory(input)) {
      paths.push_back(input);
      continue;
    }
    try {
      std::vector<std::string> found = analysis::traces_in_directory(input);
      if (found.empty()) {
        fmt::print(stderr, "gpumemtrace: the directory '{}' holds no trace (*.db)\n", input);
        return kExitBadInput;
      }
      paths.insert(paths.end(), found.begin(), found.end());
    } catch (const analysis::TraceError& e) {
      fmt::print(stderr, "gpumemtrace: {}\n", e.what());
      return kExitBadInput;
    }
  }
  analysis::MergedReport report;
  try {
    report = analysis::merge_traces(paths);
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpumemtrace: internal error while merging traces: {}\n", e.what());
    return kExitInternal;
  }
  for (const auto& skipped : report.unreadable) fmt::print(stderr, "gpumemtrace: skipped: {}\n", skipped.error);
  if (report.processes.empty()) {
    fmt::print(stderr, "gpumemtrace: none of the {} traces could be read\n", paths.size());
    return kExitBadInput;
  }
  for (const auto& p : report.processes) {
    if (!p.complete) {
      fmt::print(stderr,
                 "gpumemtrace: warning: '{}' is incomplete: memory live at its end was not necessarily "
                 "leaked\n",
                 p.path);
    }
  }
  std::string text = options.format == "json" ? analysis::render_merged_json(report, options.top)
                                              : analysis::render_merged_text(report, options.top);
  if (!write_text(text, options.output_path)) return kExitBadInput;
  return report.unreadable.empty() ? kExitOk : kExitBadInput;
}

}  // namespace gmt::cli
