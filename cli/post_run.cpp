#include "cli/post_run.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <vector>

#include <fmt/core.h>

#include "analysis/format.h"
#include "analysis/model/aggregate_report.h"
#include "analysis/model/analyze.h"
#include "analysis/model/findings.h"
#include "analysis/model/report.h"
#include "analysis/model/verify.h"
#include "analysis/read/symbolizer.h"
#include "analysis/read/trace_file.h"
#include "cli/progress.h"
#include "schema/trace_init.h"
#include "schema/trace_schema.h"

namespace gmt::cli {

bool symbolize_trace_file(const std::string& path, bool quiet) {
  try {
    auto trace = analysis::TraceFile::open(path, analysis::OpenMode::ReadWrite);
    Progress progress("symbolizing " + path, quiet);
    auto stats =
        analysis::symbolize_trace(trace, [&](size_t done, size_t total) { progress.update(done, total, "addresses"); });
    progress.finish();
    // No index is added (schema::kCreateAnalysisIndexesSql is for one's own SQL, docs/trace-format.md): the
    // analyzer never looks an address up, and events_by_address was ~15 of 54 bytes per event on disk (issue 35).
    if (!quiet && !stats.missing_modules.empty()) {
      fmt::print(stderr, "gpumemtrace: {} module(s) could not be read for symbols (moved, deleted or rebuilt): {}\n",
                 stats.missing_modules.size(), stats.missing_modules.front());
    }
    return true;
  } catch (const analysis::TraceError& e) {
    fmt::print(stderr, "gpumemtrace: {}\n", e.what());
    return false;
  }
}

// run --verify: the cross-check's verdict in one line (report --fail-on-disagreement makes it an exit status).
static void print_cross_check_summary(const analysis::Report& report) {
  if (!report.cross_check) return;
  const analysis::CrossCheck& check = *report.cross_check;
  if (!check.ran()) {
    fmt::print(stderr, "  cross-check: did not run: {}\n", check.unavailable.value_or("the trace does not say why"));
  } else if (check.disagreements() == 0) {
    fmt::print(stderr, "  cross-check: {} and {} agree: {} events matched one to one, 0 disagreements\n",
               check.counting_backend, check.checking_backend, check.matched);
  } else {
    fmt::print(stderr, "  cross-check: {} DISAGREEMENTS: {} events only {} saw, {} only {} saw ({} matched)\n",
               check.disagreements(), check.only_counting, check.counting_backend, check.only_checking,
               check.checking_backend, check.matched);
  }
}

// Framework heaps (analysis/model/heaps.h): what each allocator still held at exit, cached (not a leak) or with its
// blocks not recorded (then no verdict on it is clean).
static void print_heaps_summary(const analysis::Report& report) {
  for (const analysis::HeapAtExit& heap : report.heaps) {
    if (heap.opaque) {  // JAX/XLA's arena: the one line naming what gives per-buffer truth
      fmt::print(stderr, "  cached at exit by {}: {} (not a leak; no verdict on JAX's buffers in it: {})\n",
                 heap.allocator, analysis::format_bytes_exact(heap.reserved_bytes), heap.note);
    } else if (heap.cached()) {
      if (heap.reserved_allocations == 0) continue;
      fmt::print(stderr, "  cached at exit by {}: {} (not a leak)\n", heap.allocator,
                 analysis::format_bytes_exact(heap.reserved_bytes));
    } else {
      fmt::print(stderr, "  reserved at exit by {}: {}, blocks not recorded ({})\n", heap.allocator,
                 analysis::format_bytes_exact(heap.reserved_bytes), heap.note);
    }
  }
}

// The report's first findings (analysis/model/findings.h), a verdict and the user's line each: what to fix, before
// opening the report.
static void print_findings_summary(const analysis::Report& report) {
  constexpr size_t kShown = 3;
  const std::vector<analysis::Finding> findings = analysis::findings_of(report);
  if (findings.empty()) return;
  fmt::print(stderr, "  findings, largest first:\n");
  for (size_t i = 0; i < findings.size() && i < kShown; ++i) {
    fmt::print(stderr, "    {}. {}\n", i + 1, findings[i].verdict);
    if (!findings[i].user_frame.empty()) fmt::print(stderr, "       at {}\n", findings[i].user_frame);
    if (!findings[i].during.empty()) fmt::print(stderr, "       {}\n", findings[i].during);
    if (!findings[i].evidence.empty()) fmt::print(stderr, "       {}\n", findings[i].evidence);
  }
  if (findings.size() > kShown) fmt::print(stderr, "    ... {} more in the report\n", findings.size() - kShown);
}

// "1.23M", "45.6k", "789": a rate for the summary line.
static std::string short_count(double value) {
  if (value >= 1e6) return fmt::format("{:.2f}M", value / 1e6);
  if (value >= 1e4) return fmt::format("{:.1f}k", value / 1e3);
  return fmt::format("{:.0f}", value);
}

// What the profiler cost this run: events per second, and its own time per event on the app's threads as the
// recorder measured it (recorder/self_cost.h), so that a user sees the cost on their own program.
static void print_cost_summary(const analysis::Report& report) {
  const analysis::TraceInfo& trace = report.trace;
  // An aggregate trace keeps few events as rows: the rate is of the events the recorder saw.
  const uint64_t events = report.aggregate ? report.aggregate->events_seen : trace.event_count;
  std::string line = fmt::format("  recorded {} events", events);
  if (trace.duration_ns > 0) {
    const double per_second = static_cast<double>(events) * 1e9 / static_cast<double>(trace.duration_ns);
    line +=
        fmt::format(" in {} ({} per second)", analysis::format_duration(trace.duration_ns), short_count(per_second));
  }
  if (report.aggregate) line += fmt::format(", {} kept as rows (run --aggregate)", report.aggregate->events_kept);
  std::vector<std::string> costs;
  if (trace.self_cost_block) {
    costs.push_back(
        fmt::format("{:.2f} us per tensor event", static_cast<double>(trace.self_cost_block->ns_per_event) / 1e3));
  }
  if (trace.self_cost_cuda) {
    costs.push_back(
        fmt::format("{:.2f} us per CUDA-level event", static_cast<double>(trace.self_cost_cuda->ns_per_event) / 1e3));
  }
  if (!costs.empty()) {
    line += "; gpumemtrace's own time on your threads: " + costs[0];
    if (costs.size() > 1) line += ", " + costs[1];
    const uint64_t timed = (trace.self_cost_block ? trace.self_cost_block->events_timed : 0) +
                           (trace.self_cost_cuda ? trace.self_cost_cuda->events_timed : 0);
    line += fmt::format(" (measured on {} event{})", timed, timed == 1 ? "" : "s");
  }
  fmt::print(stderr, "{}\n", line);
}

// The heaps whose blocks were recorded (their blocks are the block level's figures), as one name for a sentence.
static std::string block_level_name(const analysis::Report& report) {
  std::string names;
  for (const analysis::HeapAtExit& heap : report.heaps) {
    if (heap.opaque || !heap.blocks_recorded || heap.in_leaks) continue;
    names += (names.empty() ? "" : ", ") + heap.allocator;
  }
  return names;
}

// Each count at the level it was made at (docs/design.md "Two levels of truth"): the CUDA level's allocations, frees
// and failures, then, where a framework heap's blocks were recorded, its blocks and its failed requests (the
// CUDA-level attempts made inside those are their evidence, not failures of their own).
static void print_counts_by_level(const analysis::Report& report, const std::string& heaps) {
  const auto& t = report.totals;
  uint64_t failed_requests = 0;
  for (const analysis::AllocFailure& failure : report.failures) failed_requests += failure.heap_source ? 1 : 0;
  const uint64_t cuda_failures = t.failed_allocations - std::min(t.failed_allocations, failed_requests);
  std::string inside;
  if (t.failed_attempts_in_requests > 0) {
    inside = fmt::format(" (and {} made inside the failed request{} below)", t.failed_attempts_in_requests,
                         failed_requests == 1 ? "" : "s");
  }
  fmt::print(stderr, "  CUDA level: allocations {}, frees {}, failed allocations {}{}\n", t.allocations, t.frees,
             cuda_failures, inside);
  if (heaps.empty()) return;
  fmt::print(stderr, "  block level ({}): blocks {}, freed {}, failed requests {}\n", heaps, t.block_allocations,
             t.block_frees, failed_requests);
}

// "6 CUDA-level allocations", "45 blocks", "45 blocks and 1 CUDA-level allocation": what the leaked count is made of.
static std::string leaked_count_text(const analysis::Report& report, bool with_blocks) {
  const auto& t = report.totals;
  uint64_t blocks = 0;
  if (with_blocks) {
    for (const analysis::HeapAtExit& heap : report.heaps) {
      if (!heap.opaque && heap.blocks_recorded && !heap.in_leaks) blocks += heap.held_blocks;
    }
  }
  blocks = std::min(blocks, t.leaked_allocations);
  const uint64_t cuda = t.leaked_allocations - blocks;
  auto cuda_text = [cuda] { return fmt::format("{} CUDA-level allocation{}", cuda, cuda == 1 ? "" : "s"); };
  if (blocks == 0) return cuda_text();
  const std::string block_text = fmt::format("{} block{}", blocks, blocks == 1 ? "" : "s");
  return cuda == 0 ? block_text : block_text + " and " + cuda_text();
}

bool print_run_summary(const std::string& path) {
  try {
    auto trace = analysis::TraceFile::open(path);
    analysis::Report report = analysis::analyze_trace(trace);
    const auto& t = report.totals;
    fmt::print(stderr, "gpumemtrace: trace {}{}\n", path, report.trace.simulated ? " (simulated CUDA runtime)" : "");
    const std::string heaps = block_level_name(report);
    print_counts_by_level(report, heaps);
    fmt::print(stderr, "  peak live at the CUDA level {} at {}\n", analysis::format_bytes_exact(t.peak_bytes),
               analysis::format_duration(t.peak_time_ns));
    if (t.leaked_allocations == 0 && !analysis::listed_leaks_exact(report)) {
      fmt::print(stderr, "  no leak among the recorded blocks, but not every block was recorded: no verdict\n");
    } else if (t.leaked_allocations == 0) {
      fmt::print(stderr, "  {}\n", analysis::no_leaks_sentence(report));
    } else {
      fmt::print(stderr, "  leaked {} in {} from {} call stack{}\n", analysis::format_bytes_exact(t.leaked_bytes),
                 leaked_count_text(report, !heaps.empty()), report.leak_groups_total,
                 report.leak_groups_total == 1 ? "" : "s");
    }
    print_heaps_summary(report);
    print_findings_summary(report);
    if (!report.trace.complete) {
      if ((report.trace.stop_reason && !report.trace.stop_reason->empty()) || report.trace.app_exit_signal) {
        fmt::print(stderr, "  warning: the trace is incomplete ({})\n", analysis::incomplete_reason(report.trace));
      } else {
        fmt::print(stderr, "  warning: the trace is incomplete (the process did not exit cleanly)\n");
      }
    }
    if (report.trace.frees_after_close > 0) {
      fmt::print(stderr, "  warning: {}\n", analysis::frees_after_close_text(report.trace));
    }
    print_cross_check_summary(report);
    print_cost_summary(report);
    fmt::print(stderr, "  details: gpumemtrace report {}\n", path);
    return true;
  } catch (const analysis::TraceError& e) {
    fmt::print(stderr, "gpumemtrace: {}\n", e.what());
    return false;
  }
}

bool write_empty_trace(const EmptyTrace& trace, std::string& error) {
  sqlite3* db = schema::create_trace_file(trace.path, error);
  if (!db) return false;
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  std::string mono = std::to_string(static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec);
  bool complete = trace.stop_reason.empty();
  std::vector<std::pair<const char*, std::string>> meta = {
      {schema::meta::kPid, std::to_string(trace.pid)},
      {schema::meta::kCommandLine, trace.command_line},
      {schema::meta::kStartMonotonicNs, mono},
      {schema::meta::kComplete, complete ? "1" : "0"},
      {schema::meta::kSimulated, trace.simulated ? "1" : "0"},
      {schema::meta::kToolVersion, GMT_VERSION},
      {schema::meta::kDroppedEvents, "0"},
      {schema::meta::kSymbolized, "1"},
  };
  if (complete) meta.emplace_back(schema::meta::kEndMonotonicNs, mono);
  if (!complete) meta.emplace_back(schema::meta::kStopReason, trace.stop_reason);
  if (!trace.backend.empty()) meta.emplace_back(schema::meta::kBackend, trace.backend);
  if (!trace.verify_unavailable.empty()) meta.emplace_back(schema::meta::kVerifyUnavailable, trace.verify_unavailable);
  bool ok = true;
  for (const auto& [key, value] : meta) ok = ok && schema::set_meta(db, key, value);
  if (!ok) error = fmt::format("cannot write trace '{}': {}", trace.path, sqlite3_errmsg(db));
  sqlite3_close(db);
  return ok;
}

bool is_trace_stump(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  if (st.st_size == 0) return true;
  sqlite3* db = nullptr;
  bool stump = false;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* stmt = nullptr;
    // Anything SQLite cannot read is left alone: `report` names it damaged, which it is.
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1", -1, &stmt,
                           nullptr) == SQLITE_OK) {
      sqlite3_bind_text(stmt, 1, "meta", -1, SQLITE_STATIC);
      stump = sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_int64(stmt, 0) == 0;
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  return stump;
}

}  // namespace gmt::cli
