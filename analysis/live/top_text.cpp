// See top_text.h.
#include "analysis/live/top_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "analysis/format.h"

namespace gmt::analysis {
namespace {

std::string device_label(int64_t device) { return device < 0 ? "host" : fmt::format("GPU {}", device); }

// A line cut to the terminal's width (counted in bytes: labels are ASCII but for the sparkline, kept short).
std::string fit(std::string line, size_t width) {
  if (width > 4 && line.size() > width) {
    line.resize(width - 3);
    line += "...";
  }
  return line + "\n";
}

std::string count_text(uint64_t count) { return fmt::format("{} {}", count, count == 1 ? "alloc" : "allocs"); }

}  // namespace

std::string sparkline(const std::vector<uint64_t>& values) {
  static const char* const kBars[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  const uint64_t top = values.empty() ? 0 : *std::max_element(values.begin(), values.end());
  std::string line;
  for (uint64_t value : values) {
    const size_t bar =
        top == 0 ? 0 : static_cast<size_t>((static_cast<double>(value) / static_cast<double>(top)) * 7.0);
    line += kBars[std::min<size_t>(bar, 7)];
  }
  return line;
}

std::string render_top_section(const TopView& view, TopState state, size_t width) {
  std::string out;
  const std::string what = state == TopState::Ended ? (view.complete ? "ended" : "ended (trace incomplete)")
                           : view.paused            ? "running, recording PAUSED (gpumemtrace ctl ... resume)"
                                                    : "running";
  out += fit(fmt::format("pid {}  {}  [{}]", view.pid ? std::to_string(*view.pid) : "?",
                         view.command_line.empty() ? "(command line not recorded)" : view.command_line, what),
             width);
  out += fit(fmt::format("  trace {}{}  at {}  {} events", view.trace_path, view.aggregate ? " (aggregate)" : "",
                         format_duration(view.duration_ns), view.events),
             width);

  out += fit(fmt::format("Live bytes{}", view.recent_span_ns > 0 ? fmt::format(" (CUDA level over the last {})",
                                                                               format_duration(view.recent_span_ns))
                                                                 : ""),
             width);
  if (view.devices.empty()) out += "  nothing allocated yet\n";
  for (const TopDevice& device : view.devices) {
    std::string line = fmt::format("  {:<6} CUDA {:>12}  peak {:>12}", device_label(device.device),
                                   format_bytes(device.cuda_bytes), format_bytes(device.cuda_peak_bytes));
    if (device.tensor_bytes) line += fmt::format("  tensors {:>12}", format_bytes(*device.tensor_bytes));
    out += line + "  " + sparkline(device.recent) + "\n";
  }

  out += fit(fmt::format("Top call sites by live bytes ({})", view.level), width);
  if (view.by_live.empty()) out += "  none\n";
  for (const TopSite& site : view.by_live) {
    out += fit(fmt::format("  {:>26}  {:>11}  {}", format_bytes_exact(site.bytes), count_text(site.count), site.where),
               width);
  }

  out += fit(fmt::format("Grown over the last {}", format_duration(view.growth_window_ns)), width);
  if (view.by_growth.empty()) out += "  none\n";
  for (const TopSite& site : view.by_growth) {
    out +=
        fit(fmt::format("  {:>26}  now {:>10}  {}", "+" + format_bytes_exact(static_cast<uint64_t>(site.growth_bytes)),
                        format_bytes(site.bytes), site.where),
            width);
  }

  out += fit(fmt::format(
                 "Failed allocations: {}{}", view.failures_total,
                 view.failures_total > view.failures.size() ? fmt::format(" (the last {})", view.failures.size()) : ""),
             width);
  for (auto it = view.failures.rbegin(); it != view.failures.rend(); ++it) {
    out += fit(fmt::format("  at {:>10}  {:<6} {:>12}  {}  {}", format_duration(it->time_ns), device_label(it->device),
                           format_bytes(it->requested_bytes), it->label, it->where),
               width);
  }
  for (const std::string& note : view.notes) out += fit("note: " + note, width);
  return out;
}

}  // namespace gmt::analysis
