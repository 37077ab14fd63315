// `gpumemtrace report a.db b.db ...` or `report DIR`: one report over the traces of a multi-process job
// (analysis/model/merge.h). report_command.cpp dispatches here when it is given more than one trace or a directory.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace gmt::cli {

struct MergedReportOptions {
  std::vector<std::string> inputs;  // trace files and directories (every *.db directly inside)
  std::string format = "text";
  size_t top = 10;
  std::string output_path;  // empty: stdout
};

// True when `inputs` asks for a merged report: more than one input, or a directory.
bool wants_merged_report(const std::vector<std::string>& inputs);

// Exit status: 0; 2 when no trace could be found or read, or when any input was unreadable (the report over
// the readable ones is still written; stderr names each skipped file).
int run_merged_report(const MergedReportOptions& options);

}  // namespace gmt::cli
