// The analysis model: one pass over a trace's events turns it into a Report (totals, peak, leaks grouped by
// call stack, failed allocations, and memory over time: timeline, peaks per device, growth, fragmentation,
// pools; over_time.h, docs/analysis.md). Renderers (render.h) only format a Report; they never query the trace.
//
// Times in a Report are nanoseconds relative to the process start (meta start_monotonic_ns; when that key
// is absent, the first event's time), so "at 1.2 s" means 1.2 s into the run.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/model/allocator_stats.h"
#include "analysis/model/filters.h"
#include "analysis/model/heap_report.h"
#include "analysis/read/devices.h"
#include "analysis/read/stacks.h"
#include "analysis/read/trace_file.h"
#include "analysis/read/trace_info.h"
#include "schema/trace_schema.h"

namespace gmt::analysis {

struct CrossCheck;        // verify.h
struct AggregateSummary;  // aggregate_report.h

// The memory kinds that count towards live bytes and the peak. Other codes (None, or unknown numbers in a
// damaged trace) are tracked for leaks but not counted in live bytes.
inline constexpr std::array<schema::MemoryKind, 4> kCountedKinds = {
    schema::MemoryKind::Device, schema::MemoryKind::Managed, schema::MemoryKind::HostPinned,
    schema::MemoryKind::VmmPhysical};

// One number per counted memory kind.
template <typename T>
struct PerKind {
  T device{};
  T managed{};
  T host_pinned{};
  T vmm_physical{};  // cuMemCreate'd physical memory, live until released and unmapped

  // nullptr for kinds that are not counted.
  T* find(schema::MemoryKind kind) {
    switch (kind) {
      case schema::MemoryKind::Device: return &device;
      case schema::MemoryKind::Managed: return &managed;
      case schema::MemoryKind::HostPinned: return &host_pinned;
      case schema::MemoryKind::VmmPhysical: return &vmm_physical;
      default: return nullptr;
    }
  }
  const T* find(schema::MemoryKind kind) const { return const_cast<PerKind*>(this)->find(kind); }
};

struct LeakGroup {
  // The allocation call stack shared by the group: the lowest-id raw stack among those that resolve to the
  // same functions and source lines (an unrolled loop calls one line from several pcs).
  Stack stack;
  std::vector<int64_t> stack_ids;                // every raw stack in the group, ascending
  uint64_t bytes = 0;                            // sum of the sizes still live at the end
  uint64_t count = 0;                            // allocations still live at the end
  std::vector<schema::MemoryKind> memory_kinds;  // distinct, ascending by code
  std::vector<schema::Api> apis;                 // distinct, ascending by code
  std::vector<int64_t> devices;                  // distinct, ascending (-1: host / unknown)
  int64_t first_alloc_ns = 0;                    // relative times of the oldest and newest live allocation
  int64_t last_alloc_ns = 0;
  // Tensor blocks that autograd's worker threads made during a backward() (or torch.autograd.grad) call of another
  // thread (docs/analysis.md "Tensors of backward()"): that call's stack, whose Python frames name the line. A link
  // beside `stack`, which stays the worker's own. 0: no such call; kBackwardCallerUnknown: several calls ran at the
  // time, so which one made them is not known. Groups are split by it.
  int64_t backward_stack_id = 0;
  Stack backward_stack;  // loaded when backward_stack_id > 0
};

inline constexpr int64_t kBackwardCallerUnknown = -1;

// Memory held by one call stack at one moment. Raw stacks are grouped as leaks are (same functions and
// source lines are one group); `stack` is the group's lowest-id raw stack.
struct StackBytes {
  Stack stack;
  std::vector<int64_t> stack_ids;  // every raw stack of the group holding memory then, ascending
  uint64_t bytes = 0;
  uint64_t count = 0;  // allocations
};

// Free space between the live device allocations of one device at one moment (docs/analysis.md): the span
// runs from the lowest live address to the end of the highest live allocation.
struct FragmentationStats {
  int64_t time_ns = 0;  // relative to the process start
  uint64_t allocations = 0;
  uint64_t span_bytes = 0;
  uint64_t free_bytes = 0;         // inside the span, covered by no live allocation
  uint64_t largest_gap_bytes = 0;  // the largest free gap between two neighbouring live allocations
  double ratio = 0;                // 1 - largest_gap / free; 0 when nothing in the span is free
};

struct AllocFailure {
  int64_t event_id = 0;
  int64_t time_ns = 0;  // relative to the process start
  schema::Api api = schema::Api::Unknown;
  schema::MemoryKind memory_kind = schema::MemoryKind::None;
  uint64_t requested_bytes = 0;  // 0 when the trace recorded a negative request
  int64_t error = 0;             // cudaError_t
  int64_t device = -1;
  std::optional<int64_t> device_free;  // cudaMemGetInfo right after the failure, when recorded
  std::optional<int64_t> device_total;
  Stack stack;
  // OOM forensics (docs/analysis.md): "fragmentation" when the device reported more free memory than the
  // request, "out of memory" when not, "unknown" when free memory was not recorded, "other error" when the
  // error is not an out-of-memory error.
  std::string label;
  std::optional<FragmentationStats> fragmentation;  // of the failure's device at that moment
  std::vector<StackBytes> top_stacks;               // on the failure's device at that moment
  // A block allocation that a framework heap failed (heaps.h; label "heap fragmentation" when the heap's free
  // space covered the request, "heap out of memory" when not): which allocator, and its heap then.
  std::optional<int64_t> heap_source;  // schema::Source code
  std::string allocator;               // "PyTorch's caching allocator", ...; "" for a CUDA-level failure
  std::optional<HeapSpace> heap;
  int64_t thread_id = 0;
  // A framework's failed request (failed_requests.h): the event that ended this thread's previous request of that
  // heap (its block or its failure; 0: none), which bounds this request's window. Within one thread event ids
  // follow the thread's own order.
  int64_t previous_request_event_id = 0;
  // The heap's segments this thread gave back inside the request's window: PyTorch's retry after freeing its cache.
  uint64_t segments_released = 0;
  uint64_t segment_bytes_released = 0;
  // The CUDA-level allocations that failed inside this request (failed_requests.h), in order: its evidence, not
  // failures of their own (they are in no other list). Empty for a CUDA-level failure.
  std::vector<AllocFailure> attempts;
  // PyTorch's OOM only: the allocator setting a what-if replay found to avoid it (analysis/replay/whatif.h), one
  // sentence with its figures; set by `report` (cli/report_command.cpp), empty when none was found or tried.
  std::string best_setting;
};

struct Totals {
  // Alloc events, except the ignored ones (see inconsistencies). A zero-byte allocation that returned the
  // null pointer counts here but is never live, so allocations may exceed frees + leaked_allocations.
  uint64_t allocations = 0;
  uint64_t allocated_bytes = 0;  // their sizes summed
  // Free events that released a live allocation. Frees of unknown addresses are in unmatched_frees, and
  // frees of the null pointer (cudaFree(0), a common way to create the context) are in neither.
  uint64_t frees = 0;
  // Failed allocations as the program saw them: a framework's failed request (a block-level failure) counts once,
  // and the CUDA-level attempts made inside it count in failed_attempts_in_requests instead; every other
  // AllocFailed event counts here.
  uint64_t failed_allocations = 0;
  uint64_t failed_attempts_in_requests = 0;
  // Where a framework heap's blocks are recorded (Report::heaps): the blocks it handed out and took back, every heap
  // together. The allocations and frees above stay CUDA-level (the heaps' segments among them).
  uint64_t block_allocations = 0;
  uint64_t block_frees = 0;
  // Live at the end of the trace, every kind, before any min_bytes filter: what the app still held. Where a
  // framework heap's blocks are recorded (Report::heaps) that is its live blocks, plus the live CUDA-level
  // allocations that back no heap; the CUDA-level allocations backing a heap are cached_at_exit instead.
  uint64_t leaked_bytes = 0;
  uint64_t leaked_allocations = 0;
  // CUDA-level allocations a heap allocator (or JAX/XLA's arena, Report::heaps) still held at exit: not leaks.
  uint64_t cached_at_exit_bytes = 0;
  uint64_t cached_at_exit_allocations = 0;
  uint64_t peak_bytes = 0;       // see Report::peak_by_kind for the definition
  int64_t peak_time_ns = 0;      // relative time the peak was first reached; 0 when peak_bytes is 0
  uint64_t unmatched_frees = 0;  // Free of an address with no live allocation (double free, or the
                                 // allocation happened before recording started)
  // Records that cannot be right, none of which stops the analysis: an Alloc on an address that is already
  // live (the new one replaces the old, whose free was never seen); a negative size (the event is
  // ignored); an Alloc of the null pointer with a non-zero size (ignored); an Alloc whose memory kind is
  // not device/managed/host_pinned (kept for leaks, left out of live bytes and the peak).
  uint64_t inconsistencies = 0;
};

// "exited with code 5", "killed by signal 9 (Killed)"; nullopt when the trace does not say (older traces, and
// processes other than the one `run` started).
std::optional<std::string> app_exit_text(const TraceInfo& trace);

// Why a trace is incomplete, for a sentence: "recording stopped early: disk full: ..." when the trace says
// why, else the usual suspects.
inline std::string incomplete_reason(const TraceInfo& trace) {
  if (trace.salvaged) return *trace.salvaged;
  // Events recorded in its last moments (up to 200 ms) may be missing: how many, where `run` counted them.
  const int64_t lost = trace.events_lost_at_exit.value_or(0);
  const std::string lost_text = std::to_string(lost) + (lost == 1 ? " event" : " events") +
                                " recorded in the process's last moments " + (lost == 1 ? "was" : "were") + " lost";
  if (trace.stop_reason && !trace.stop_reason->empty()) {
    return "recording stopped early: " + *trace.stop_reason + (lost > 0 ? "; " + lost_text : "");
  }
  if (trace.app_exit_signal) {
    const std::string killed = "killed by signal " + std::to_string(*trace.app_exit_signal);
    if (lost > 0) return lost_text + " (" + killed + ")";
    if (trace.events_lost_at_exit) return "the process was " + killed + " (every event it recorded is in the trace)";
    return "the process was " + killed;
  }
  return "the process crashed, was killed or is still running";
}

// Live bytes over time, pre-aggregated into buckets of equal width from the process start to the end of the
// trace: at most kMaxTimelineBuckets, and no more than the changes of live bytes (but kMinTimelineBuckets
// when the run is long enough). Each bucket holds the least and the most live bytes at any moment inside it
// (the level carried in from before the bucket included), so a spike is never averaged away.
inline constexpr size_t kMaxTimelineBuckets = 1000;
inline constexpr size_t kMinTimelineBuckets = 100;
struct TimelineBucket {
  int64_t start_ns = 0;  // relative to the process start
  uint64_t min_bytes = 0;
  uint64_t max_bytes = 0;
};
struct TimelineSeries {
  int64_t device = -1;  // -1: host memory or unknown device
  schema::MemoryKind memory_kind = schema::MemoryKind::None;
  std::vector<TimelineBucket> buckets;
  uint64_t end_bytes = 0;  // live at the end of the trace (of an aggregate trace: at its last window's end)
};
struct Timeline {
  int64_t bucket_ns = 0;               // width of each bucket; 0 (and no buckets) when nothing was ever live
  std::vector<TimelineBucket> total;   // every device and kind together
  std::vector<TimelineSeries> series;  // one per device and kind that was ever allocated, by device then kind
  uint64_t series_not_tracked = 0;     // (device, kind) pairs beyond kMaxTimelineSeries (a damaged trace)
};
inline constexpr size_t kMaxTimelineSeries = 256;

// The peak of one device (every counted kind on it; device -1 is host memory) and what was live then.
struct DevicePeak {
  int64_t device = -1;
  uint64_t bytes = 0;
  int64_t time_ns = 0;             // the first time the peak was reached
  std::vector<StackBytes> stacks;  // largest first, at most AnalyzeOptions::top_stacks
  uint64_t stack_groups = 0;       // groups holding memory at the peak, before the cut
  // Where framework heaps' blocks are recorded: `stacks` are of what the app held (blocks, and memory backing no
  // heap) at the app's own peak on this device, which is held_bytes at held_time_ns.
  std::optional<uint64_t> held_bytes;
  int64_t held_time_ns = 0;
};

// Growth detection (docs/analysis.md has the rule): low watermarks per time window, a least-squares line
// through them, and the call stacks whose live bytes grew.
struct GrowthStack {
  Stack stack;
  std::vector<int64_t> stack_ids;
  uint64_t start_bytes = 0;  // live at the first analyzed window's low-watermark moment
  uint64_t end_bytes = 0;    // live at the last window's low-watermark moment
};
struct GrowthDevice {  // the numbers behind the verdict, for each device analyzed
  int64_t device = -1;
  std::vector<uint64_t> low_watermarks;  // one per window; the first window is the warm-up
  double slope_bytes_per_s = 0;          // least squares over the windows after the warm-up
  double fitted_rise_bytes = 0;          // slope times the time from the first to the last analyzed window
  uint64_t threshold_bytes = 0;          // max(1 MiB, 5% of the device's peak)
  uint64_t rising_steps = 0;             // consecutive analyzed windows whose low watermark rose
  uint64_t falling_steps = 0;            // ... whose low watermark fell
  uint64_t steps = 0;
  bool growing = false;
  size_t first_window = 1;  // > 1: found by the late-start rule, growing since this window
};
struct GrowthFinding {
  int64_t device = -1;
  double rate_bytes_per_s = 0;
  int64_t start_time_ns = 0;  // the low-watermark moments compared
  int64_t end_time_ns = 0;
  uint64_t start_low_bytes = 0;
  uint64_t end_low_bytes = 0;
  bool late_start = false;                     // the late-start rule: steady before start_time_ns, growing since
  std::optional<uint64_t> device_total_bytes;  // alloc_failures.device_total, else meta device_total_bytes
  std::optional<double> seconds_until_full;    // (total - end low) / rate, from the end of the trace
  std::vector<GrowthStack> stacks;             // grown, largest growth first, at most top_stacks
  uint64_t growing_stack_groups = 0;           // before the cut
};
struct Growth {
  bool analyzed = false;
  std::string reason;  // why not analyzed (empty when analyzed)
  uint64_t windows = 0;
  int64_t window_ns = 0;
  int64_t start_ns = 0;  // the analyzed interval: from the first to the last allocation
  int64_t end_ns = 0;
  std::vector<GrowthDevice> devices;
  std::vector<GrowthFinding> findings;
};

struct DeviceFragmentation {
  int64_t device = -1;
  std::optional<FragmentationStats> at_peak;  // at the device's peak (absent when no device allocation was live)
  FragmentationStats at_end;
};

// A pool_usage sample (schema 3) with the pool's exact used bytes at that moment (from the trace's events, when
// the pool's allocations were recorded; else the sample's own used bytes).
struct PoolSample {
  int64_t time_ns = 0;  // relative to the process start
  uint64_t reserved_bytes = 0;
  uint64_t used_bytes = 0;
};

// One stream-ordered pool (pools.h, docs/analysis.md "Stream-ordered pools"). Used bytes are exact: the live
// requested bytes of the pool's stream-ordered allocations at every moment. Reserved bytes are what the driver
// said at the pool_usage samples (taken at pool calls, throttled): sampled, never exact.
struct PoolUsage {
  int64_t pool = 0;  // the handle (kGraphMemoryPool for a device's graph memory pool); 0 when no sample named it
  int64_t device = -1;
  // "created" (a pool of the app's: cudaMallocFromPoolAsync's), "default" (the device's current pool:
  // cudaMallocAsync's), "graph" (CUDA graphs' memory), "unrecorded" (a FromPool call whose pool the trace lacks).
  std::string kind = "created";
  uint64_t samples = 0;
  // A lower bound, never below the exact used peak (a pool holds at least what it handed out): the driver's reserved
  // bytes are read only at samples (at each new used peak, within one writer batch, and at the end since schema v9),
  // so the true peak may lie between them. sampled_peak_reserved_bytes is the samples' own maximum.
  uint64_t peak_reserved_bytes = 0;
  uint64_t sampled_peak_reserved_bytes = 0;
  bool peak_reserved_from_used = false;  // the samples' peak was below the used peak: the figure is the used peak
  uint64_t peak_used_bytes = 0;          // exact when used_from_events; else over the samples
  uint64_t last_reserved_bytes = 0;      // at the last sample
  uint64_t last_used_bytes = 0;          // at the end of the trace when used_from_events; else at the last sample
  uint64_t max_unused_bytes = 0;         // max over samples of reserved - used: the pool's fragmentation
  int64_t max_unused_time_ns = 0;
  bool used_from_events = false;  // the pool's allocations were in the trace: used bytes are exact
  int64_t peak_used_time_ns = 0;  // the first moment the exact peak was reached
  uint64_t allocations = 0;       // stream-ordered allocations made in the pool
  uint64_t live_allocations = 0;  // still live at the end of the trace
  int64_t last_sample_time_ns = 0;
  std::vector<PoolSample> series;  // reserved and used at the samples, at most kMaxPoolSeries (evenly picked)
};

// Memory by NVTX range (ranges.h, docs/analysis.md "Memory by NVTX range"). Each allocation belongs to
// one bucket: the innermost push/pop range open on its thread, else the latest start/end range open in the
// process, else the `none` bucket. Freed and live numbers are of the allocations made in the bucket.
struct RangeStats {
  std::string name;          // the range's message; "" when it has none
  std::string domain;        // "" for the default domain
  bool none = false;         // the bucket of allocations made outside every range
  uint64_t repetitions = 0;  // occurrences of the range (rows of `ranges`); 0 for `none`
  uint64_t allocations = 0;
  uint64_t allocated_bytes = 0;
  uint64_t frees = 0;  // of allocations made in the range, wherever and whenever freed
  uint64_t freed_bytes = 0;
  uint64_t live_allocations = 0;  // made in the range and still live at the end of the trace
  uint64_t live_bytes = 0;
  // The highest live bytes of the process (allocations of every range, counted kinds) at any moment while
  // an occurrence of the range was open; 0 for `none`.
  uint64_t peak_live_bytes = 0;
};

// Growth per repetition of a range repeated kMinRangeRepetitions times or more (docs/analysis.md): at the
// end of each repetition, the live bytes of allocations made inside any occurrence of the range (at any
// depth). The first repetition is the warm-up.
struct RangeGrowth {
  std::string name;
  std::string domain;
  uint64_t iterations = 0;                  // repetitions that ended
  std::vector<uint64_t> live_bytes_at_end;  // per ended repetition, in end order (at most kMaxRangeSeries)
  double bytes_per_iteration = 0;           // least-squares slope after the warm-up
  double fitted_rise_bytes = 0;
  uint64_t threshold_bytes = 0;
  uint64_t rising_steps = 0;
  uint64_t falling_steps = 0;
  uint64_t steps = 0;
  bool growing = false;
  std::vector<GrowthStack> stacks;  // for a growing range: grown since the first analyzed repetition
  uint64_t growing_stack_groups = 0;
};

struct RangeReport {
  bool available = false;             // the trace has a `ranges` table (schema 4 or later)
  uint64_t range_count = 0;           // occurrences analyzed (all, or those overlapping --since/--until)
  std::vector<RangeStats> by_name;    // largest allocated bytes first; `none` last
  std::vector<RangeGrowth> repeated;  // every range repeated often enough, verdict or not, by name
  std::vector<RangeGrowth> growth;    // the growing ones (copies of their `repeated` entries), fastest first
};

// One occurrence of a range, for drawing (times relative to the process start).
struct RangeSpan {
  std::string name;
  std::string domain;
  int64_t thread_id = 0;
  int64_t start_ns = 0;
  std::optional<int64_t> end_ns;  // nullopt: never closed
  int64_t depth = 0;              // push/pop nesting depth in its domain; -1 for a start/end range
};
inline constexpr size_t kMaxRangeSpans = 2000;

// CI: suppressions and breakdowns (suppressions.h, breakdown.h; docs/analysis.md defines them).

// One suppression rule and the leaks it took out of the report. A rule that matched nothing is still
// listed (count 0), like LeakSanitizer's "unused suppression", so stale rules are noticed.
struct SuppressedLeaks {
  std::string rule;     // as written, e.g. "leak:load_weights"
  std::string origin;   // "FILE:LINE" of the rule
  uint64_t bytes = 0;   // leaked bytes it suppressed
  uint64_t count = 0;   // leaked allocations it suppressed
  uint64_t groups = 0;  // leak groups (call stacks as the leaks group them) it suppressed
};

// Allocations of one thread, stream or module: how many, how much, what was still live at the end (after
// suppressions) and what was live at the moment of the total peak.
struct BreakdownRow {
  int64_t id = 0;                    // the thread id (gettid) or the stream (cudaStream_t as an integer); 0 for modules
  std::string module;                // by_module: the allocating module's file name, or "(unknown)" / "(no stack)"
  std::string module_path;           // by_module: its full path, when known
  std::optional<std::string> label;  // by_module: the library it belongs to ("NCCL", "PyTorch"), when known
  uint64_t allocations = 0;
  uint64_t allocated_bytes = 0;
  uint64_t leaked_bytes = 0;
  uint64_t peak_bytes = 0;  // live at the total peak (Totals::peak_time_ns)
};
struct Breakdown {
  std::vector<BreakdownRow> by_thread;  // each list: most bytes at the peak first, then most allocated
  std::vector<BreakdownRow> by_stream;
  std::vector<BreakdownRow> by_module;
};

// PyTorch's tensor blocks (the block-level mode, `run --torch-blocks`; docs/analysis.md "PyTorch tensors"):
// analyzed on their own, by the same rules as device memory (a block counts as live from its allocation to its
// free), and never part of the Report's totals, peaks, leaks or growth: they live inside device memory that is
// counted there already (PyTorch's segments).
struct TensorBlockReport {
  uint64_t overruns = 0;  // meta tensor_blocks_overruns: drains that found blocks lost (how many is unknown)
  // allocations/frees: blocks handed out and given back; leaked_*: still held by tensors at the end of the trace
  // ("tensors alive at exit": PyTorch frees cached memory only at teardown, so this is not a CUDA-level leak);
  // peak_*: the most bytes held by tensors at once; unmatched_frees: frees of blocks allocated before the mode
  // started (or lost in an overrun).
  Totals totals;
  std::vector<LeakGroup> alive_at_exit;  // by Python stack, largest first (at or above min_bytes)
  uint64_t alive_groups_total = 0;
  uint64_t alive_groups_below_min_bytes = 0;
  std::vector<DevicePeak> peaks;          // bytes held by tensors, per device, with the stacks holding them
  Growth growth;                          // low watermarks of bytes held by tensors per time window
  std::vector<RangeGrowth> range_growth;  // NVTX ranges whose tensors pile up per repetition, fastest first
};

// Memory of other processes opened here (docs/analysis.md "Imported memory"): IPC handles
// (cudaIpcOpenMemHandle, cuIpcOpenMemHandle) and mappings of imported VMM handles (cuMemImportFromShareableHandle
// then cuMemMap). The exporter owns it: it is in none of the totals, peaks, leaks or timelines above.
struct ImportedDevice {
  int64_t device = -1;  // where the memory lives (the exporter's device, as this process numbers it)
  uint64_t peak_bytes = 0;
  int64_t peak_time_ns = 0;        // relative; the first time the peak was reached
  uint64_t opens = 0;              // IPC opens and mappings of imported VMM handles on this device
  uint64_t open_at_end_bytes = 0;  // still open (IPC) or mapped (VMM) at the end of the trace
};
// Handles still open at the end, grouped by the call stack that opened them (as leaks are): worth closing,
// but they hold no memory of this process.
struct OpenImportGroup {
  Stack stack;
  std::vector<int64_t> stack_ids;  // ascending
  uint64_t bytes = 0;              // the opened sizes (IPC) or mapped bytes (VMM handles), summed
  uint64_t count = 0;              // handles
  std::vector<schema::Api> apis;   // distinct, ascending
  std::vector<int64_t> devices;    // distinct, ascending
};
struct ImportedMemory {
  uint64_t opens = 0;       // IPC opens + imported VMM handles
  uint64_t closes = 0;      // IPC closes + releases of imported VMM handles
  uint64_t peak_bytes = 0;  // every device together
  int64_t peak_time_ns = 0;
  std::vector<ImportedDevice> devices;     // by device
  std::vector<OpenImportGroup> left_open;  // most bytes first, then most handles
  uint64_t left_open_handles = 0;
  uint64_t left_open_bytes = 0;
  bool any() const { return opens > 0; }
};

struct Report {
  TraceInfo trace;
  std::vector<DeviceInfo> devices;  // the devices table, by ordinal; empty for traces before v6
  ImportedMemory imported;
  Totals totals;
  // Peak definition: live bytes are the sizes of allocations that are allocated and not yet freed, summed
  // over device, managed and host-pinned memory together (every kind a CUDA allocator hands out). The
  // total peak is the largest value that sum reaches after any event; its time is the first event that
  // reached it. Each kind's peak is its own maximum, reached at its own time, so the per-kind peaks do not
  // in general add up to the total peak.
  PerKind<uint64_t> peak_by_kind;
  PerKind<int64_t> peak_time_ns_by_kind;  // 0 for a kind whose peak is 0
  PerKind<uint64_t> leaked_by_kind;
  std::vector<LeakGroup> leaks;              // every group at or above min_bytes, largest first
  uint64_t leak_groups_total = 0;            // groups before the min_bytes filter
  uint64_t leak_groups_below_min_bytes = 0;  // groups dropped by AnalyzeOptions::min_bytes
  uint64_t leaked_bytes_below_min_bytes = 0;
  std::optional<uint64_t> min_bytes;   // the filter in effect, for the renderers to mention
  std::vector<AllocFailure> failures;  // in event order
  // Over time (docs/analysis.md).
  Timeline timeline;
  std::vector<DevicePeak> peaks;  // one per device that held memory, by device
  Growth growth;
  std::vector<DeviceFragmentation> fragmentation;  // one per device with device allocations, by device
  // Stream-ordered pools (pools.h); nullopt: the trace has neither a pool_usage table nor a pool allocation.
  std::optional<std::vector<PoolUsage>> pools;
  // A framework allocator's own statistics (allocator_stats.h); nullopt: the trace has no such table.
  std::optional<AllocatorStats> allocator_stats;
  // NVTX ranges (ranges.h) and the filters in effect (filters.h).
  RangeReport ranges;
  std::vector<RangeSpan> range_spans;  // outermost first (start/end, then depth 0, 1, ...), then by start
  uint64_t range_spans_left_out = 0;   // beyond kMaxRangeSpans
  FilterSummary filters;
  // CI (suppressions.h, breakdown.h).
  std::vector<SuppressedLeaks> suppressed;  // one per rule given, in the order given; empty without rules
  Breakdown breakdown;
  // nullopt: the trace has no block-level data (meta tensor_blocks absent: the mode was off).
  std::optional<TensorBlockReport> tensor_blocks;
  // Framework heaps (heaps.h): when their segments are recorded, the leaks, growth, ranges, breakdown and the
  // peaks' stacks above are at block level (blocks, and CUDA-level memory that backs no heap); totals, peaks'
  // bytes, the timeline and fragmentation stay CUDA-level. One entry per heap allocator seen, by source.
  std::vector<HeapAtExit> heaps;
  std::vector<HeapFragmentation> heap_fragmentation;  // per heap and device whose blocks were recorded
  // run --verify: the two backends' events matched one to one (verify.h); null for every other trace.
  std::shared_ptr<const CrossCheck> cross_check;
  // run --aggregate: a bounded trace, whose over-time figures are per window (aggregate_report.h); null otherwise.
  std::shared_ptr<const AggregateSummary> aggregate;
};

// Whether "no leaks" may be said: false when a heap's blocks were not (all) recorded.
inline bool leak_verdict_complete(const Report& report) {
  for (const HeapAtExit& heap : report.heaps) {
    if (!heap.blocks_recorded) return false;
  }
  return true;
}

// Whether the leak groups listed are what the app held: false when a heap's reservation is among them (in_leaks) or
// its blocks were lost. An opaque arena (JAX/XLA's) keeps only the "no leaks" verdict from being said: none of it is
// in the leak groups, so the other leaks stay exact.
inline bool listed_leaks_exact(const Report& report) {
  for (const HeapAtExit& heap : report.heaps) {
    if (!heap.blocks_recorded && !heap.opaque) return false;
  }
  return true;
}

// Whether the trace can support a verdict such as "no leaks" or a passed CI gate: the process's whole run is in
// it (complete) and no event was lost. Otherwise an allocation it missed may be the leak (or, for frees that came
// after the trace was closed, a leak it lists may have been freed).
inline bool supports_verdict(const TraceInfo& trace) {
  return trace.complete && trace.dropped_events == 0 && trace.frees_after_close == 0 &&
         trace.unjudged_after_pause_allocations == 0;
}

// "4 allocations (6.00 MiB) alive when recording was paused (gpumemtrace ctl) were never seen freed: ...": why a
// complete trace with ctl pauses supports no leak verdict; "" when none.
std::string unjudged_after_pause_text(const TraceInfo& trace);

// "3 frees came after the trace was closed (...)": why a complete trace supports no leak verdict; "" when none did.
std::string frees_after_close_text(const TraceInfo& trace);

// The sentence for a report without leaked allocations, in every renderer's words (lower case, no period):
// "recorded no allocations" (nothing to judge; on an incomplete trace "no allocation reached the trace, which is
// incomplete: no verdict"), "no leaks among the recorded allocations, but the trace is
// incomplete: no verdict" (supports_verdict is false), "no leak among the recorded blocks, but not every block was
// recorded: no verdict" (leak_verdict_complete is false), "no leaks outside JAX/XLA's preallocated arena; no
// verdict on JAX's buffers in it" (only an opaque arena's blocks are unknown), else "no leaks: every allocation was
// freed".
std::string no_leaks_sentence(const Report& report);

}  // namespace gmt::analysis
