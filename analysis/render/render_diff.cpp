// `gpumemtrace diff` as text and JSON (diff.h).
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "analysis/format.h"
#include "analysis/model/diff.h"
#include "analysis/model/stack_view.h"

namespace gmt::analysis {
namespace {

using Json = nlohmann::ordered_json;

// Frames shown per stack in the text diff; the JSON has them all.
constexpr size_t kDiffFrames = 4;

std::string signed_bytes(int64_t delta) {
  if (delta == 0) return "0 B";
  const uint64_t magnitude = delta > 0 ? static_cast<uint64_t>(delta) : 0 - static_cast<uint64_t>(delta);
  return (delta > 0 ? "+" : "-") + format_bytes(magnitude);
}

std::string threshold_text(const DiffOptions& options) {
  if (options.threshold_percent) return fmt::format("{}% of the base", *options.threshold_percent);
  if (options.threshold_bytes == 0) return "any growth";
  return format_bytes_exact(options.threshold_bytes);
}

void append_peak_row(std::string& out, const std::string& name, const PeakDiff& peak) {
  out += fmt::format("  {:<14} {:>12} {:>12} {:>13}{}\n", name, format_bytes(peak.base_bytes),
                     format_bytes(peak.new_bytes), signed_bytes(peak.delta()), peak.regression ? "  REGRESSION" : "");
}

Json peak_json(const PeakDiff& peak) {
  Json json;
  if (peak.device) json["device"] = *peak.device;
  json["base_bytes"] = peak.base_bytes;
  json["new_bytes"] = peak.new_bytes;
  json["delta_bytes"] = peak.delta();
  json["regression"] = peak.regression;
  return json;
}

Json optional_number(const std::optional<double>& value) { return value ? Json(*value) : Json(nullptr); }

Json frames_json(const Stack& stack) {
  Json frames = Json::array();
  for (const Frame& frame : stack.frames) {
    frames.push_back(
        Json{{"level", frame.level},
             {"pc", format_pc(frame.pc)},
             {"function", frame.function ? Json(*frame.function) : Json(nullptr)},
             {"file", frame.file ? Json(*frame.file) : Json(nullptr)},
             {"line", frame.line ? Json(*frame.line) : Json(nullptr)},
             {"module", frame.module ? Json(*frame.module) : Json(nullptr)},
             {"module_offset", frame.module_offset ? Json(format_pc(*frame.module_offset)) : Json(nullptr)}});
  }
  return frames;
}

std::string optional_count(const std::optional<uint64_t>& value) {
  return value ? std::to_string(*value) : std::string("-");
}

void append_allocators(std::string& out, const TraceDiff& diff) {
  if (diff.allocators.empty()) return;
  out += "\nFramework allocators (their own statistics)\n";
  for (const AllocatorDiff& entry : diff.allocators) {
    out +=
        fmt::format("  device {}: base {}, new {}\n", entry.device, entry.base ? entry.base->allocator : "no samples",
                    entry.next ? entry.next->allocator : "no samples");
    const AllocatorFigures none;
    const AllocatorFigures& b = entry.base ? *entry.base : none;
    const AllocatorFigures& n = entry.next ? *entry.next : none;
    auto bytes_row = [&out](const char* name, uint64_t base_bytes, uint64_t new_bytes) {
      out += fmt::format("    {:<22} {:>12} {:>12} {:>13}\n", name, format_bytes(base_bytes), format_bytes(new_bytes),
                         signed_bytes(static_cast<int64_t>(new_bytes - base_bytes)));
    };
    bytes_row("peak reserved", b.peak_reserved_bytes, n.peak_reserved_bytes);
    bytes_row("peak in use", b.peak_in_use_bytes, n.peak_in_use_bytes);
    if (b.peak_inactive_split_bytes || n.peak_inactive_split_bytes) {
      bytes_row("peak inactive split", b.peak_inactive_split_bytes.value_or(0),
                n.peak_inactive_split_bytes.value_or(0));
    }
    out += fmt::format("    {:<22} {:>12} {:>12}\n", "alloc retries", optional_count(b.alloc_retries),
                       optional_count(n.alloc_retries));
    out += fmt::format("    {:<22} {:>12} {:>12}\n", "OOMs", optional_count(b.ooms), optional_count(n.ooms));
  }
}

Json figures_json(const std::optional<AllocatorFigures>& figures) {
  if (!figures) return Json(nullptr);
  auto optional = [](const std::optional<uint64_t>& value) { return value ? Json(*value) : Json(nullptr); };
  return Json{{"allocator", figures->allocator},
              {"peak_reserved_bytes", figures->peak_reserved_bytes},
              {"peak_in_use_bytes", figures->peak_in_use_bytes},
              {"peak_inactive_split_bytes", optional(figures->peak_inactive_split_bytes)},
              {"alloc_retries", optional(figures->alloc_retries)},
              {"ooms", optional(figures->ooms)}};
}

}  // namespace

std::string render_diff_text(const TraceDiff& diff) {
  std::string out = "gpumemtrace diff\n";
  out += fmt::format("  base       {}\n  new        {}\n  threshold  {}\n", diff.base_path, diff.new_path,
                     threshold_text(diff.options));

  out += fmt::format("\n  {:<14} {:>12} {:>12} {:>13}\n", "", "base", "new", "delta");
  append_peak_row(out, "peak", diff.total_peak);
  for (const PeakDiff& peak : diff.device_peaks) {
    append_peak_row(out, *peak.device < 0 ? "  host memory" : fmt::format("  device {}", *peak.device), peak);
  }
  append_peak_row(out, "leaked", diff.leaked);

  if (diff.leaks.empty()) {
    out += "\nLeaks by call stack: none in either run.\n";
  } else {
    size_t counts[5] = {};
    for (const LeakDiff& leak : diff.leaks) ++counts[static_cast<int>(leak.status)];
    out += fmt::format("\nLeaks by call stack ({} new, {} grew, {} shrank, {} gone, {} same)\n", counts[0], counts[2],
                       counts[3], counts[1], counts[4]);
    for (const LeakDiff& leak : diff.leaks) {
      out += fmt::format("\n  {:<6} {:>13}  {} -> {}{}\n", to_string(leak.status), signed_bytes(leak.delta()),
                         format_bytes(leak.base_bytes), format_bytes(leak.new_bytes),
                         leak.regression ? "  REGRESSION" : "");
      if (leak.stack.frames.empty()) out += "      (no call stack)\n";
      for (const std::string& line : stack_view_lines(leak.stack, StackViewOptions{.max_lines = kDiffFrames})) {
        out += (line.rfind("...", 0) == 0 ? "      " : "      at ") + line + "\n";
      }
    }
  }

  if (!diff.growth.empty()) {
    out += "\nGrowth findings\n";
    for (const GrowthDiff& entry : diff.growth) {
      const std::string device = entry.device < 0 ? "host memory" : fmt::format("device {}", entry.device);
      const double rate = entry.new_rate_bytes_per_s.value_or(entry.base_rate_bytes_per_s.value_or(0));
      out += fmt::format("  {:<12} {:<12} {}/s{}\n", device, entry.status(),
                         format_bytes(static_cast<uint64_t>(std::max(0.0, rate))),
                         entry.regression() ? "  REGRESSION" : "");
    }
  } else if (!diff.base_growth_analyzed || !diff.new_growth_analyzed) {
    out += "\nGrowth: not analyzed in one or both runs (too few allocations); each report says why.\n";
  }

  append_allocators(out, diff);

  if (diff.regressions.empty()) {
    out += "\nNo regression.\n";
  } else {
    out += fmt::format("\n{} regression{}:\n", diff.regressions.size(), diff.regressions.size() == 1 ? "" : "s");
    for (const std::string& sentence : diff.regressions) out += "  " + sentence + "\n";
  }
  return out;
}

std::string render_diff_json(const TraceDiff& diff) {
  Json devices = Json::array();
  for (const PeakDiff& peak : diff.device_peaks) devices.push_back(peak_json(peak));
  Json leaks = Json::array();
  for (const LeakDiff& leak : diff.leaks) {
    leaks.push_back(Json{{"status", to_string(leak.status)},
                         {"base_bytes", leak.base_bytes},
                         {"new_bytes", leak.new_bytes},
                         {"delta_bytes", leak.delta()},
                         {"base_count", leak.base_count},
                         {"new_count", leak.new_count},
                         {"regression", leak.regression},
                         {"stack", frames_json(leak.stack)}});
  }
  Json growth = Json::array();
  for (const GrowthDiff& entry : diff.growth) {
    growth.push_back(Json{{"device", entry.device},
                          {"status", entry.status()},
                          {"base_rate_bytes_per_s", optional_number(entry.base_rate_bytes_per_s)},
                          {"new_rate_bytes_per_s", optional_number(entry.new_rate_bytes_per_s)},
                          {"regression", entry.regression()}});
  }
  Json allocators = Json::array();
  for (const AllocatorDiff& entry : diff.allocators) {
    allocators.push_back(
        Json{{"device", entry.device}, {"base", figures_json(entry.base)}, {"new", figures_json(entry.next)}});
  }
  Json document{
      {"base", diff.base_path},
      {"new", diff.new_path},
      {"threshold", Json{{"bytes", diff.options.threshold_percent ? Json(nullptr) : Json(diff.options.threshold_bytes)},
                         {"percent", optional_number(diff.options.threshold_percent)}}},
      {"regression", !diff.regressions.empty()},
      {"regressions", diff.regressions},
      {"peak", peak_json(diff.total_peak)},
      {"devices", std::move(devices)},
      {"leaked", peak_json(diff.leaked)},
      {"leaks", std::move(leaks)},
      {"growth", Json{{"base_analyzed", diff.base_growth_analyzed},
                      {"new_analyzed", diff.new_growth_analyzed},
                      {"devices", std::move(growth)}}},
      {"allocators", allocators},
  };
  return document.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace gmt::analysis
