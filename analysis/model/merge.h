// One report over many traces: the processes of a multi-process job (torchrun, mpirun, srun), one trace each.
// Each trace is analyzed alone (analyze_trace) and only its summary is kept, so merging hundreds of traces
// needs the memory of one analysis plus a few hundred bytes per process. docs/analysis.md ("Merged report")
// defines every number here, the outlier rule included.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/model/report.h"

namespace gmt::analysis {

// The outlier rule (docs/analysis.md): a process whose peak or leaked bytes exceed the median of all
// processes by both this factor and this many bytes.
inline constexpr double kOutlierFactor = 1.5;
inline constexpr uint64_t kOutlierMinExcessBytes = uint64_t{64} << 20;
// Leak stacks kept from each trace, and across all traces: the cross-rank table stays bounded.
inline constexpr size_t kLeakGroupsPerTrace = 50;
inline constexpr size_t kMaxMergedLeakSites = 1000;

// One GPU as one process used it.
struct ProcessDevice {
  int64_t device = -1;
  uint64_t peak_bytes = 0;
  int64_t peak_time_ns = 0;
  std::optional<double> fragmentation_at_peak;  // FragmentationStats::ratio at the device's peak
  uint64_t nccl_bytes_at_peak = 0;              // of peak_bytes, held by allocations made from libnccl
};

struct ProcessSummary {
  std::string path;
  std::optional<std::string> rank;  // meta rank, as the launcher gave it
  std::optional<std::string> rank_source;
  std::optional<std::string> local_rank;
  std::optional<std::string> world_size;
  std::optional<std::string> hostname;
  std::optional<int64_t> pid;
  std::vector<int64_t> devices;  // meta devices; else the devices that held memory
  std::vector<ProcessDevice> per_device;
  uint64_t peak_bytes = 0;  // Totals::peak_bytes: every device and kind together
  uint64_t host_pinned_peak_bytes = 0;
  uint64_t leaked_bytes = 0;        // Totals::leaked_bytes
  uint64_t nccl_bytes_at_peak = 0;  // summed over devices
  uint64_t nccl_bytes_at_end = 0;   // live at the end (leaked), made from libnccl
  // Other processes' memory opened by this one (Report::imported): in none of the figures above.
  uint64_t imported_peak_bytes = 0;
  std::vector<ImportedDevice> imported_devices;  // by device
  uint64_t imported_left_open_handles = 0;
  uint64_t imported_left_open_bytes = 0;
  std::vector<DeviceInfo> device_info;  // the trace's devices table (names, UUIDs); empty before schema v6
  bool growth_found = false;
  bool growth_analyzed = false;
  bool complete = false;
  bool simulated = false;
};

// max / median over the processes (the median of an even count is the lower middle value, so that with two
// processes each is compared with the other). ratio: nullopt when the median is 0.
struct Spread {
  uint64_t median = 0;
  uint64_t max = 0;
  std::optional<double> ratio;
  size_t max_process = 0;  // index into MergedReport::processes
};

struct Imbalance {
  Spread peak;
  Spread leaked;
};

struct Outlier {
  size_t process = 0;   // index into MergedReport::processes
  std::string measure;  // "peak" or "leaked"
  uint64_t bytes = 0;
  uint64_t median = 0;
};

// A leak call stack across processes, matched by its symbolized frames (function, file, line; the module
// name for an unsymbolized frame), since the same code sits at different addresses in each process.
struct MergedLeak {
  Stack stack;  // as in the first process that had it
  uint64_t bytes = 0;
  uint64_t count = 0;
  std::vector<size_t> processes;  // indices into MergedReport::processes, ascending
  bool nccl = false;
};

struct UnreadableTrace {
  std::string path;
  std::string error;  // TraceError::what(): a sentence naming the file
};

struct MergedReport {
  std::vector<ProcessSummary> processes;  // by rank (numerically) when ranks are known, then by path
  Imbalance imbalance;
  std::vector<Outlier> outliers;            // by process, peak before leaked
  std::vector<MergedLeak> leaks;            // largest first, at most kMaxMergedLeakSites
  uint64_t leak_sites_dropped = 0;          // sites cut to keep the table bounded
  std::vector<UnreadableTrace> unreadable;  // in the order given
};

// True when the frame belongs to CUDA itself or to the profiler (libcuda, libcudart, libcupti, libgpumemtrace):
// the first frame outside these says who asked for the memory.
bool is_cuda_frame(const Frame& frame);
// True when the innermost frame outside CUDA is in NCCL: a module named libnccl*, or a function named nccl*
// (NCCL linked statically into another library).
bool allocated_by_nccl(const Stack& stack);

// The summary of one analyzed trace (meta read from `trace`).
ProcessSummary summarize_process(const TraceFile& trace, const Report& report);

// Reads each trace in turn, analyzing one at a time. Traces that cannot be read are listed in `unreadable`,
// never thrown.
MergedReport merge_traces(const std::vector<std::string>& paths);

// The *.db files directly inside a directory, sorted by name. Throws TraceError when it cannot be listed.
std::vector<std::string> traces_in_directory(const std::string& directory);

// Renderers (render_merge.cpp): text for a person, JSON for scripts (shape in docs/analysis.md). `top`: leak
// stacks shown.
std::string render_merged_text(const MergedReport& report, size_t top);
std::string render_merged_json(const MergedReport& report, size_t top);

}  // namespace gmt::analysis
