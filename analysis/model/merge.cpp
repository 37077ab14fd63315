#include "analysis/model/merge.h"

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <unordered_map>

#include "analysis/format.h"
#include "analysis/model/analyze.h"
#include "analysis/read/trace_file.h"

namespace gmt::analysis {
namespace {

bool starts_with(const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; }

std::vector<int64_t> parse_device_list(const std::string& text) {
  std::vector<int64_t> devices;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    char* rest = nullptr;
    long value = std::strtol(item.c_str(), &rest, 10);
    if (!item.empty() && rest && *rest == '\0' && value >= 0) devices.push_back(value);
    start = end + 1;
  }
  std::sort(devices.begin(), devices.end());
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
  return devices;
}

// What makes two stacks of different processes "the same code": function, file and line of every frame, or
// the module's name where a frame is not symbolized (its pc differs from process to process).
std::string leak_site_key(const Stack& stack) {
  std::string key;
  for (const Frame& frame : stack.frames) {
    if (frame.function) {
      key += *frame.function;
      if (frame.file) key += "@" + *frame.file + ":" + std::to_string(frame.line.value_or(0));
    } else {
      key += "?[" + (frame.module ? path_basename(*frame.module) : std::string("?")) + "]";
    }
    key += "\n";
  }
  if (stack.frames.empty()) key = stack.id == 0 ? "(no stack)" : "(missing stack)";
  return key;
}

// The median as defined in merge.h (lower middle value) and the maximum with its process.
Spread spread(const std::vector<ProcessSummary>& processes, uint64_t ProcessSummary::*field) {
  Spread s;
  if (processes.empty()) return s;
  std::vector<uint64_t> values;
  for (size_t i = 0; i < processes.size(); ++i) {
    uint64_t v = processes[i].*field;
    values.push_back(v);
    if (v > s.max) {
      s.max = v;
      s.max_process = i;
    }
  }
  std::sort(values.begin(), values.end());
  s.median = values[(values.size() - 1) / 2];
  if (s.median > 0) s.ratio = static_cast<double>(s.max) / static_cast<double>(s.median);
  return s;
}

bool is_outlier(uint64_t bytes, uint64_t median) {
  return static_cast<double>(bytes) > kOutlierFactor * static_cast<double>(median) &&
         bytes - median >= kOutlierMinExcessBytes;
}

// Ranks numerically when both parse, then processes with a rank before those without, then by path.
bool process_order(const ProcessSummary& a, const ProcessSummary& b) {
  if (a.rank.has_value() != b.rank.has_value()) return a.rank.has_value();
  if (a.rank && b.rank && *a.rank != *b.rank) {
    char* end_a = nullptr;
    char* end_b = nullptr;
    long ra = std::strtol(a.rank->c_str(), &end_a, 10);
    long rb = std::strtol(b.rank->c_str(), &end_b, 10);
    if (*end_a == '\0' && *end_b == '\0' && ra != rb) return ra < rb;
    return *a.rank < *b.rank;
  }
  return a.path < b.path;
}

class LeakSites {
 public:
  void add(const Report& report, size_t process) {
    size_t taken = 0;
    for (const LeakGroup& group : report.leaks) {
      if (taken++ == kLeakGroupsPerTrace) break;
      std::string key = leak_site_key(group.stack);
      auto [it, inserted] = sites_.try_emplace(key);
      MergedLeak& site = it->second;
      if (inserted) {
        site.stack = group.stack;
        site.nccl = allocated_by_nccl(group.stack);
      }
      site.bytes += group.bytes;
      site.count += group.count;
      if (site.processes.empty() || site.processes.back() != process) site.processes.push_back(process);
    }
    if (sites_.size() > 2 * kMaxMergedLeakSites) prune(kMaxMergedLeakSites);
  }

  // Largest first, at most kMaxMergedLeakSites; process indices renamed through `new_index`.
  std::vector<MergedLeak> take(const std::vector<size_t>& new_index, uint64_t& dropped) {
    prune(kMaxMergedLeakSites);
    dropped = dropped_;
    std::vector<MergedLeak> out;
    for (auto& [key, site] : sites_) {
      for (size_t& p : site.processes) p = new_index[p];
      std::sort(site.processes.begin(), site.processes.end());
      out.push_back(std::move(site));
    }
    std::sort(out.begin(), out.end(), [](const MergedLeak& a, const MergedLeak& b) {
      if (a.bytes != b.bytes) return a.bytes > b.bytes;
      return a.processes.size() > b.processes.size();
    });
    return out;
  }

 private:
  void prune(size_t keep) {
    if (sites_.size() <= keep) return;
    std::vector<std::pair<uint64_t, std::string>> by_bytes;
    for (const auto& [key, site] : sites_) by_bytes.emplace_back(site.bytes, key);
    std::sort(by_bytes.begin(), by_bytes.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (size_t i = keep; i < by_bytes.size(); ++i) sites_.erase(by_bytes[i].second);
    dropped_ += by_bytes.size() - keep;
  }

  std::unordered_map<std::string, MergedLeak> sites_;
  uint64_t dropped_ = 0;
};

}  // namespace

bool is_cuda_frame(const Frame& frame) {
  if (!frame.module) return false;
  std::string name = path_basename(*frame.module);
  return starts_with(name, "libcuda.") || starts_with(name, "libcudart") || starts_with(name, "libcupti") ||
         starts_with(name, "libgpumemtrace");
}

bool allocated_by_nccl(const Stack& stack) {
  for (const Frame& frame : stack.frames) {
    if (is_cuda_frame(frame)) continue;
    if (frame.module && starts_with(path_basename(*frame.module), "libnccl")) return true;
    // NCCL linked statically into another library (some PyTorch builds): its allocation helpers are named
    // nccl* (ncclCudaCalloc, ncclCuMemAlloc, ...), possibly in a namespace or as a template.
    if (!frame.function) return false;
    const std::string& f = *frame.function;
    return starts_with(f, "nccl") || f.find("::nccl") != std::string::npos || f.find(" nccl") != std::string::npos;
  }
  return false;
}

ProcessSummary summarize_process(const TraceFile& trace, const Report& report) {
  ProcessSummary p;
  p.path = trace.path();
  p.rank = trace.meta(schema::meta::kRank);
  p.rank_source = trace.meta(schema::meta::kRankSource);
  p.local_rank = trace.meta(schema::meta::kLocalRank);
  p.world_size = trace.meta(schema::meta::kWorldSize);
  p.hostname = report.trace.hostname;
  p.pid = report.trace.pid;
  p.peak_bytes = report.totals.peak_bytes;
  p.host_pinned_peak_bytes = report.peak_by_kind.host_pinned;
  p.leaked_bytes = report.totals.leaked_bytes;
  p.imported_peak_bytes = report.imported.peak_bytes;
  p.imported_devices = report.imported.devices;
  p.imported_left_open_handles = report.imported.left_open_handles;
  p.imported_left_open_bytes = report.imported.left_open_bytes;
  p.device_info = report.devices;
  p.growth_analyzed = report.growth.analyzed;
  p.growth_found = !report.growth.findings.empty();
  p.complete = report.trace.complete;
  p.simulated = report.trace.simulated;
  for (const DevicePeak& peak : report.peaks) {
    if (peak.device < 0) continue;  // host memory: in peak_bytes and host_pinned_peak_bytes
    ProcessDevice d;
    d.device = peak.device;
    d.peak_bytes = peak.bytes;
    d.peak_time_ns = peak.time_ns;
    for (const StackBytes& held : peak.stacks) {
      if (allocated_by_nccl(held.stack)) d.nccl_bytes_at_peak += held.bytes;
    }
    for (const DeviceFragmentation& f : report.fragmentation) {
      if (f.device == peak.device && f.at_peak) d.fragmentation_at_peak = f.at_peak->ratio;
    }
    p.nccl_bytes_at_peak += d.nccl_bytes_at_peak;
    p.per_device.push_back(d);
  }
  for (const LeakGroup& group : report.leaks) {
    if (allocated_by_nccl(group.stack)) p.nccl_bytes_at_end += group.bytes;
  }
  if (auto devices = trace.meta(schema::meta::kDevices)) p.devices = parse_device_list(*devices);
  if (p.devices.empty()) {
    for (const ProcessDevice& d : p.per_device) p.devices.push_back(d.device);
  }
  return p;
}

MergedReport merge_traces(const std::vector<std::string>& paths) {
  MergedReport merged;
  LeakSites sites;
  AnalyzeOptions options;
  // Every stack live at a device's peak, so that NCCL's share of it is exact; the Report is dropped as soon
  // as it is summarized, so this costs one trace's worth of memory at a time.
  options.top_stacks = 100000;
  for (const std::string& path : paths) {
    try {
      TraceFile trace = TraceFile::open(path);
      Report report = analyze_trace(trace, options);
      merged.processes.push_back(summarize_process(trace, report));
      sites.add(report, merged.processes.size() - 1);
    } catch (const TraceError& e) {
      merged.unreadable.push_back({path, e.what()});
    }
  }

  std::vector<size_t> order(merged.processes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return process_order(merged.processes[a], merged.processes[b]); });
  std::vector<size_t> new_index(order.size());
  std::vector<ProcessSummary> sorted;
  sorted.reserve(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    new_index[order[i]] = i;
    sorted.push_back(std::move(merged.processes[order[i]]));
  }
  merged.processes = std::move(sorted);
  merged.leaks = sites.take(new_index, merged.leak_sites_dropped);

  merged.imbalance.peak = spread(merged.processes, &ProcessSummary::peak_bytes);
  merged.imbalance.leaked = spread(merged.processes, &ProcessSummary::leaked_bytes);
  if (merged.processes.size() >= 2) {
    for (size_t i = 0; i < merged.processes.size(); ++i) {
      const ProcessSummary& p = merged.processes[i];
      if (is_outlier(p.peak_bytes, merged.imbalance.peak.median)) {
        merged.outliers.push_back({i, "peak", p.peak_bytes, merged.imbalance.peak.median});
      }
      if (is_outlier(p.leaked_bytes, merged.imbalance.leaked.median)) {
        merged.outliers.push_back({i, "leaked", p.leaked_bytes, merged.imbalance.leaked.median});
      }
    }
  }
  return merged;
}

std::vector<std::string> traces_in_directory(const std::string& directory) {
  DIR* dir = opendir(directory.c_str());
  if (!dir) throw TraceError("cannot list the directory '" + directory + "': " + std::strerror(errno));
  std::vector<std::string> paths;
  std::string prefix = directory.empty() || directory.back() == '/' ? directory : directory + "/";
  while (dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name.size() > 3 && name.compare(name.size() - 3, 3, ".db") == 0) paths.push_back(prefix + name);
  }
  closedir(dir);
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace gmt::analysis
