// The merged report (merge.h) as text and as JSON. Like the single-trace renderers, they only format: every
// number comes from the MergedReport, so text and JSON agree.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "analysis/format.h"
#include "analysis/model/merge.h"
#include "analysis/model/stack_view.h"
#include "analysis/render/render_json_parts.h"

namespace gmt::analysis {
namespace {

using Json = nlohmann::ordered_json;

constexpr size_t kTextFramesPerStack = 8;
constexpr size_t kTextProcessesPerLeak = 8;

// "rank 3", else "pid 1234", else the trace's path: how a process is named everywhere in the report.
std::string process_label(const ProcessSummary& p) {
  if (p.rank) return "rank " + *p.rank;
  if (p.pid) return fmt::format("pid {}", *p.pid);
  return p.path;
}

std::string device_list(const std::vector<int64_t>& devices) {
  if (devices.empty()) return "-";
  std::string out;
  for (int64_t d : devices) out += (out.empty() ? "" : ",") + std::to_string(d);
  return out;
}

std::string ratio_text(const std::optional<double>& ratio) {
  return ratio ? fmt::format("{:.2f}x", *ratio) : "n/a (median 0)";
}

void append_processes(std::string& out, const MergedReport& report) {
  out += fmt::format("Processes ({})\n", report.processes.size());
  out += fmt::format("  {:<10} {:<16} {:>8} {:<8} {:>12} {:>12} {:>12} {:<6} {:<10}\n", "process", "host", "pid",
                     "devices", "peak", "leaked", "NCCL@peak", "growth", "trace");
  for (const ProcessSummary& p : report.processes) {
    out += fmt::format("  {:<10} {:<16} {:>8} {:<8} {:>12} {:>12} {:>12} {:<6} {:<10}\n", process_label(p),
                       p.hostname.value_or("?"), p.pid ? std::to_string(*p.pid) : "?", device_list(p.devices),
                       format_bytes(p.peak_bytes), format_bytes(p.leaked_bytes), format_bytes(p.nccl_bytes_at_peak),
                       !p.growth_analyzed ? "n/a" : (p.growth_found ? "yes" : "no"),
                       p.complete ? "complete" : "INCOMPLETE");
    for (const ProcessDevice& d : p.per_device) {
      std::string fragmentation =
          d.fragmentation_at_peak ? fmt::format("{:.2f}", *d.fragmentation_at_peak) : std::string("-");
      out += fmt::format("      {}: peak {} at {}, NCCL {} of it, fragmentation at peak {}\n",
                         describe_device(p.device_info, d.device), format_bytes(d.peak_bytes),
                         format_duration(d.peak_time_ns), format_bytes(d.nccl_bytes_at_peak), fragmentation);
    }
    for (const ImportedDevice& d : p.imported_devices) {
      out += fmt::format("      imported from other processes on {}: peak {}, {} open at the end (not counted above)\n",
                         describe_device(p.device_info, d.device), format_bytes_exact(d.peak_bytes),
                         format_bytes_exact(d.open_at_end_bytes));
    }
    if (p.imported_left_open_handles > 0) {
      out += fmt::format("      IPC handles left open: {} ({})\n", p.imported_left_open_handles,
                         format_bytes_exact(p.imported_left_open_bytes));
    }
    out += fmt::format("      {}\n", p.path);
  }
}

void append_imbalance(std::string& out, const MergedReport& report) {
  out += "\nImbalance between processes (max / median)\n";
  const Imbalance& im = report.imbalance;
  auto line = [&](const char* name, const Spread& s) {
    out += fmt::format("  {:<7} max {} ({}), median {}: {}\n", name, format_bytes(s.max),
                       process_label(report.processes[s.max_process]), format_bytes(s.median), ratio_text(s.ratio));
  };
  line("peak", im.peak);
  line("leaked", im.leaked);
  out += fmt::format("\nOutliers (above {:.1f}x the median and at least {} above it)\n", kOutlierFactor,
                     format_bytes(kOutlierMinExcessBytes));
  if (report.outliers.empty()) out += "  none\n";
  for (const Outlier& o : report.outliers) {
    out += fmt::format("  {}: {} {} (median {})\n", process_label(report.processes[o.process]), o.measure,
                       format_bytes_exact(o.bytes), format_bytes(o.median));
  }
}

void append_leaks(std::string& out, const MergedReport& report, size_t top) {
  out += "\nLeak stacks across processes (matched by function, file and line)\n";
  if (report.leaks.empty()) out += "  none\n";
  size_t shown = std::min(top, report.leaks.size());
  for (size_t i = 0; i < shown; ++i) {
    const MergedLeak& leak = report.leaks[i];
    std::string who;
    for (size_t k = 0; k < leak.processes.size() && k < kTextProcessesPerLeak; ++k) {
      who += (who.empty() ? "" : ", ") + process_label(report.processes[leak.processes[k]]);
    }
    if (leak.processes.size() > kTextProcessesPerLeak) {
      who += fmt::format(", +{} more", leak.processes.size() - kTextProcessesPerLeak);
    }
    out += fmt::format("  #{} {} in {} allocation{}, {} {} ({}){}\n", i + 1, format_bytes_exact(leak.bytes), leak.count,
                       leak.count == 1 ? "" : "s", leak.processes.size(),
                       leak.processes.size() == 1 ? "process" : "processes", who, leak.nccl ? " [NCCL]" : "");
    for (const std::string& line : stack_view_lines(leak.stack, StackViewOptions{.max_lines = kTextFramesPerStack})) {
      out += (line.rfind("...", 0) == 0 ? "      " : "      at ") + line + "\n";
    }
    if (leak.stack.frames.empty()) out += "      (no call stack)\n";
  }
  if (report.leaks.size() > shown) {
    out += fmt::format("  ... {} more leak stacks (--top N shows more)\n", report.leaks.size() - shown);
  }
}

Json merge_stack_json(const Stack& stack) {
  Json frames = Json::array();
  for (const Frame& frame : stack.frames) {
    frames.push_back(Json{{"level", frame.level},
                          {"pc", format_pc(frame.pc)},
                          {"function", optional_value(frame.function)},
                          {"file", optional_value(frame.file)},
                          {"line", optional_value(frame.line)},
                          {"module", optional_value(frame.module)}});
  }
  return frames;
}

Json imported_json(const ProcessSummary& p) {
  Json devices = Json::array();
  for (const ImportedDevice& d : p.imported_devices) {
    devices.push_back(Json{{"device", d.device},
                           {"peak_bytes", d.peak_bytes},
                           {"peak_time_ns", d.peak_time_ns},
                           {"opens", d.opens},
                           {"open_at_end_bytes", d.open_at_end_bytes}});
  }
  return Json{{"peak_bytes", p.imported_peak_bytes},
              {"per_device", devices},
              {"left_open_handles", p.imported_left_open_handles},
              {"left_open_bytes", p.imported_left_open_bytes}};
}

Json device_info_json(const std::vector<DeviceInfo>& devices) {
  Json list = Json::array();
  for (const DeviceInfo& d : devices) {
    list.push_back(Json{{"ordinal", d.ordinal},
                        {"name", optional_value(d.name)},
                        {"uuid", optional_value(d.uuid)},
                        {"total_bytes", optional_value(d.total_bytes)},
                        {"pci_bus_id", optional_value(d.pci_bus_id)}});
  }
  return list;
}

Json process_ref(const MergedReport& report, size_t index) {
  const ProcessSummary& p = report.processes[index];
  return Json{{"index", index}, {"rank", optional_value(p.rank)}, {"pid", optional_value(p.pid)}, {"path", p.path}};
}

Json spread_json(const MergedReport& report, const Spread& s) {
  return Json{{"max", s.max},
              {"median", s.median},
              {"ratio", optional_value(s.ratio)},
              {"max_process", report.processes.empty() ? Json(nullptr) : process_ref(report, s.max_process)}};
}

}  // namespace

std::string render_merged_text(const MergedReport& report, size_t top) {
  std::string out = fmt::format("gpumemtrace merged report: {} processes", report.processes.size());
  if (!report.unreadable.empty()) out += fmt::format(", {} unreadable traces skipped", report.unreadable.size());
  out += "\n\n";
  if (!report.processes.empty()) {
    append_processes(out, report);
    append_imbalance(out, report);
    append_leaks(out, report, top);
  }
  if (!report.unreadable.empty()) {
    out += "\nUnreadable traces (skipped)\n";
    for (const UnreadableTrace& u : report.unreadable) out += "  " + u.error + "\n";
  }
  return out;
}

std::string render_merged_json(const MergedReport& report, size_t top) {
  Json processes = Json::array();
  for (const ProcessSummary& p : report.processes) {
    Json devices = Json::array();
    for (const ProcessDevice& d : p.per_device) {
      devices.push_back(Json{{"device", d.device},
                             {"peak_bytes", d.peak_bytes},
                             {"peak_time_ns", d.peak_time_ns},
                             {"nccl_bytes_at_peak", d.nccl_bytes_at_peak},
                             {"fragmentation_at_peak", optional_value(d.fragmentation_at_peak)}});
    }
    processes.push_back(Json{{"path", p.path},
                             {"rank", optional_value(p.rank)},
                             {"rank_source", optional_value(p.rank_source)},
                             {"local_rank", optional_value(p.local_rank)},
                             {"world_size", optional_value(p.world_size)},
                             {"hostname", optional_value(p.hostname)},
                             {"pid", optional_value(p.pid)},
                             {"devices", p.devices},
                             {"peak_bytes", p.peak_bytes},
                             {"host_pinned_peak_bytes", p.host_pinned_peak_bytes},
                             {"leaked_bytes", p.leaked_bytes},
                             {"nccl_bytes_at_peak", p.nccl_bytes_at_peak},
                             {"nccl_bytes_at_end", p.nccl_bytes_at_end},
                             {"growth_analyzed", p.growth_analyzed},
                             {"growth_found", p.growth_found},
                             {"complete", p.complete},
                             {"simulated", p.simulated},
                             {"per_device", devices},
                             {"imported", imported_json(p)},
                             {"device_info", device_info_json(p.device_info)}});
  }
  Json outliers = Json::array();
  for (const Outlier& o : report.outliers) {
    Json entry = process_ref(report, o.process);
    entry["measure"] = o.measure;
    entry["bytes"] = o.bytes;
    entry["median"] = o.median;
    outliers.push_back(entry);
  }
  Json leaks = Json::array();
  for (size_t i = 0; i < report.leaks.size() && i < top; ++i) {
    const MergedLeak& leak = report.leaks[i];
    Json who = Json::array();
    for (size_t index : leak.processes) who.push_back(process_ref(report, index));
    leaks.push_back(Json{{"bytes", leak.bytes},
                         {"count", leak.count},
                         {"nccl", leak.nccl},
                         {"processes", who},
                         {"stack", merge_stack_json(leak.stack)}});
  }
  Json unreadable = Json::array();
  for (const UnreadableTrace& u : report.unreadable) unreadable.push_back(Json{{"path", u.path}, {"error", u.error}});
  Json doc{{"processes", processes},
           {"imbalance", Json{{"peak", spread_json(report, report.imbalance.peak)},
                              {"leaked", spread_json(report, report.imbalance.leaked)}}},
           {"outlier_rule", Json{{"factor", kOutlierFactor}, {"min_excess_bytes", kOutlierMinExcessBytes}}},
           {"outliers", outliers},
           {"leaks", leaks},
           {"leak_sites", Json{{"total", report.leaks.size()},
                               {"shown", leaks.size()},
                               {"dropped_to_bound_memory", report.leak_sites_dropped}}},
           {"unreadable", unreadable}};
  return doc.dump(2) + "\n";
}

}  // namespace gmt::analysis
