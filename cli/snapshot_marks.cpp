// See snapshot_marks.h.
#include "cli/snapshot_marks.h"

#include <fmt/core.h>

#include <vector>

#include "analysis/read/control_marks.h"
#include "analysis/read/trace_file.h"
#include "analysis/read/trace_info.h"
#include "schema/trace_schema.h"

namespace gmt::cli {

bool looks_like_seconds(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789.eE+-") == std::string::npos;
}

std::optional<std::string> snapshot_seconds(const std::string& trace_path, const std::string& name,
                                            const char* option) {
  try {
    analysis::TraceFile trace = analysis::TraceFile::open(trace_path);
    const std::optional<int64_t> start = analysis::lenient_meta_int(trace, schema::meta::kStartMonotonicNs);
    std::vector<std::string> names;
    std::optional<int64_t> at;
    for (const analysis::ControlMarks::Snapshot& snapshot : analysis::read_control_marks(trace).snapshots) {
      if (snapshot.name == name && !at) at = snapshot.time_ns;
      names.push_back(snapshot.name);
    }
    if (!at || !start) {
      std::string known;
      for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
      const std::string has = known.empty() ? "it has none" : "it has: " + known;
      if (std::string(option) == "--at") {
        fmt::print(stderr,
                   "gpumemtrace: --at '{}' is not a snapshot of '{}' ({}); snapshots are taken with "
                   "`gpumemtrace ctl PID snapshot NAME`\n",
                   name, trace_path, has);
      } else {
        fmt::print(stderr,
                   "gpumemtrace: {} '{}' is not a time: give seconds from the process start, e.g. 1.5, or "
                   "the NAME of a snapshot taken with `gpumemtrace ctl PID snapshot NAME` ('{}': {})\n",
                   option, name, trace_path, has);
      }
      return std::nullopt;
    }
    return fmt::format("{:.9f}", static_cast<double>(std::max<int64_t>(0, *at - *start)) / 1e9);
  } catch (const analysis::TraceError& error) {
    fmt::print(stderr, "gpumemtrace: {} {}: {}\n", option, name, error.what());
    return std::nullopt;
  }
}

}  // namespace gmt::cli
