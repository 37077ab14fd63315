// Random damage to a real trace, in process (test_damaged_traces.py gives it a trace that `run --simulate` wrote):
// COUNT copies of the trace, each truncated at a random length or with a random run of bytes overwritten, go
// through what `report` does (analysis/read/salvage.h's analyze_trace_file, then the text and JSON renderers). Each
// must end in one of:
//   - a TraceError naming the file (the CLI prints it and exits 2);
//   - a salvaged report, marked incomplete (never a complete trace's verdict);
//   - for an overwrite that changed nothing SQLite checks (free space, a value inside a row), a report that still
//     finds the trace's leaks (it is never "no leaks" for a trace that leaks).
// A truncation is always noticed (the header's size says so). Anything else thrown, and every crash or sanitizer
// report, fails the test. The damaged copy itself must be left as it was: the salvage works on a private copy.
//
//   damaged_traces TRACE COUNT SEED WORK_DIR
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "analysis/model/analyze.h"
#include "analysis/model/report.h"
#include "analysis/read/salvage.h"
#include "analysis/read/trace_file.h"
#include "analysis/render/render.h"

namespace {

using gmt::analysis::Report;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct Damage {
  bool truncated = false;
  std::string bytes;
  std::string what;
};

// Half the copies truncated anywhere past the first byte; the others with 1 to 4096 bytes overwritten (random
// bytes or zeros, as a torn write or a lost block leaves them) somewhere in the file.
Damage damage(const std::string& trace, std::mt19937_64& random) {
  Damage d;
  d.bytes = trace;
  if (random() % 2 == 0) {
    const size_t length = 1 + random() % (trace.size() - 1);
    d.bytes.resize(length);
    d.truncated = true;
    d.what = "truncated at " + std::to_string(length);
    return d;
  }
  const size_t run = random() % 4 == 0 ? 1 + random() % 4096 : 1 + random() % 8;
  const size_t at = random() % trace.size();
  const bool zeros = random() % 3 == 0;
  for (size_t i = at; i < at + run && i < d.bytes.size(); ++i) {
    d.bytes[i] = zeros ? '\0' : static_cast<char>(random());
  }
  d.what = "overwritten " + std::to_string(run) + " bytes at " + std::to_string(at) + (zeros ? " with zeros" : "");
  return d;
}

int fail(const std::string& what, const std::string& why) {
  std::fprintf(stderr, "FAIL (%s): %s\n", what.c_str(), why.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: damaged_traces TRACE COUNT SEED WORK_DIR\n");
    return 2;
  }
  const std::string trace = read_file(argv[1]);
  const long count = std::atol(argv[2]);
  std::mt19937_64 random(std::strtoull(argv[3], nullptr, 10));
  const std::string path = std::string(argv[4]) + "/damaged.db";
  if (trace.size() < 2) return fail("setup", "the trace is empty");
  const Report original = gmt::analysis::analyze_trace_file(argv[1]);
  if (original.totals.leaked_allocations == 0 || !original.trace.complete) {
    return fail("setup", "the trace must be complete and leak (a clean verdict must be impossible)");
  }

  long errors = 0, salvaged = 0, unnoticed = 0;
  for (long i = 0; i < count; ++i) {
    const Damage d = damage(trace, random);
    write_file(path, d.bytes);
    const std::string what = "#" + std::to_string(i) + ": " + d.what;
    try {
      const Report report = gmt::analysis::analyze_trace_file(path);
      gmt::analysis::RenderOptions options;
      if (gmt::analysis::render_text(report, options).empty() || gmt::analysis::render_json(report, options).empty()) {
        return fail(what, "an empty rendering");
      }
      if (report.trace.salvaged) {
        if (report.trace.complete) return fail(what, "a salvaged trace marked complete");
        ++salvaged;
      } else {
        if (d.truncated) return fail(what, "a truncation not noticed");
        if (report.trace.complete && report.totals.leaked_allocations == 0) return fail(what, "a clean verdict");
        ++unnoticed;
      }
    } catch (const gmt::analysis::TraceError& e) {
      if (std::string(e.what()).find(path) == std::string::npos)
        return fail(what, "a message without the file: " + std::string(e.what()));
      ++errors;
    } catch (const std::exception& e) {
      return fail(what, std::string("an internal error: ") + e.what());
    }
    if (read_file(path) != d.bytes) return fail(what, "the damaged trace was changed");
    for (const char* suffix : {"-wal", "-shm", "-journal"}) std::remove((path + suffix).c_str());
  }
  std::printf("%ld damaged copies: %ld refused with a message, %ld salvaged, %ld reported unnoticed\n", count, errors,
              salvaged, unnoticed);
  return 0;
}
