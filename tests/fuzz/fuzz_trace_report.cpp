// libFuzzer target: the path `gpumemtrace report` takes for a file it is given. The input is written as a
// file, opened with TraceFile::open (the one gate for bad input), analyzed, and rendered as text and JSON.
// A TraceError (a clear message, exit code 2 in the CLI) is a correct answer; anything else that escapes
// (another exception: the CLI's exit code 3, "internal error"), and every crash, leak or undefined behaviour
// that ASan/UBSan see, is a finding.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "analysis/model/analyze.h"
#include "analysis/model/report.h"
#include "analysis/read/trace_file.h"
#include "analysis/render/render.h"

namespace {

std::string trace_path() {
  const char* tmp = getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/gmt-fuzz-" + std::to_string(getpid()) + ".db";
}

void remove_trace(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) unlink((path + suffix).c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = trace_path();
  remove_trace(path);  // a -wal left by the previous input must not be replayed into this one
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    if (size > 0) std::fwrite(data, 1, size, f);
    std::fclose(f);
  } else {
    return 0;
  }
  try {
    auto trace = gmt::analysis::TraceFile::open(path);
    gmt::analysis::Report report = gmt::analysis::analyze_trace(trace);
    gmt::analysis::RenderOptions options;
    options.top = 5;
    std::string text = gmt::analysis::render_text(report, options);
    std::string json = gmt::analysis::render_json(report, options);
    if (text.empty() || json.empty()) __builtin_trap();
  } catch (const gmt::analysis::TraceError&) {
    // the answer for a bad file
  }
  remove_trace(path);
  return 0;
}
