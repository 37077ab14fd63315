// The analysis model: one pass over a trace's events turns it into a Report (totals, peak, leaks grouped by
// call stack, failed allocations). Renderers (render.h) only format a Report; they never query the trace.
//
// Times in a Report are nanoseconds relative to the process start (meta start_monotonic_ns; when that key
// is absent, the first event's time), so "at 1.2 s" means 1.2 s into the run.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/trace_file.h"
#include "schema/trace_schema.h"

namespace gmt::analysis {

struct AnalyzeOptions {
  // Leak groups whose total bytes are below this are left out of Report::leaks (and counted in
  // Report::leak_groups_below_min_bytes). Totals always cover every leak.
  std::optional<uint64_t> min_bytes;
};

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
      case schema::MemoryKind::Device:
        return &device;
      case schema::MemoryKind::Managed:
        return &managed;
      case schema::MemoryKind::HostPinned:
        return &host_pinned;
      case schema::MemoryKind::VmmPhysical:
        return &vmm_physical;
      default:
        return nullptr;
    }
  }
  const T* find(schema::MemoryKind kind) const { return const_cast<PerKind*>(this)->find(kind); }
};

struct Frame {
  int64_t level = 0;                    // 0 is the innermost frame (the caller of the CUDA function)
  uint64_t pc = 0;                      // return address as captured
  std::optional<std::string> function;  // nullopt when the pc is not symbolized (or has no symbol)
  std::optional<std::string> file;
  std::optional<int64_t> line;
  std::optional<std::string> module;  // full path of the module holding the pc, when known
};

struct Stack {
  int64_t id = 0;             // 0: no stack was taken for the event
  bool missing = false;       // id != 0 but the trace has no such row in `stacks`: frames stay empty
  std::vector<Frame> frames;  // innermost first
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
};

struct Totals {
  // Alloc events, except the ignored ones (see inconsistencies). A zero-byte allocation that returned the
  // null pointer counts here but is never live, so allocations may exceed frees + leaked_allocations.
  uint64_t allocations = 0;
  uint64_t allocated_bytes = 0;  // their sizes summed
  // Free events that released a live allocation. Frees of unknown addresses are in unmatched_frees, and
  // frees of the null pointer (cudaFree(0), a common way to create the context) are in neither.
  uint64_t frees = 0;
  uint64_t failed_allocations = 0;  // AllocFailed events
  uint64_t leaked_bytes = 0;        // live at the end of the trace, every kind, before any min_bytes filter
  uint64_t leaked_allocations = 0;
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

struct TraceInfo {
  std::string path;
  std::optional<int64_t> pid;
  std::optional<std::string> command_line;
  std::optional<std::string> hostname;
  std::optional<std::string> backend;
  std::optional<std::string> tool_version;
  int schema_version = 0;
  // end_monotonic_ns - start; when the end is not recorded (incomplete trace), up to the last event and
  // duration_from_events is set.
  int64_t duration_ns = 0;
  bool duration_from_events = false;
  bool complete = false;    // meta complete == "1"; otherwise the process crashed, was killed or still runs
  bool simulated = false;   // recorded under the simulated CUDA runtime
  bool symbolized = false;  // symbols were filled after the run
  uint64_t dropped_events = 0;
  uint64_t event_count = 0;  // rows of `events`, all kinds
};

struct Report {
  TraceInfo trace;
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
};

// Reads the whole trace. Throws TraceError when SQLite cannot read it (a damaged file); odd values in a
// readable trace never throw: they are counted in Totals::inconsistencies instead.
Report analyze_trace(const TraceFile& trace, const AnalyzeOptions& options = {});

}  // namespace gmt::analysis
