// The text report's fragmentation where it fails allocations: inside the framework heaps whose layout the trace
// shows (holes between live blocks, heap_fragmentation.h) and in the stream-ordered pools, whose layout the driver
// hides (reserved minus used; pools.h). docs/analysis.md defines every number. Address gaps between the driver's
// allocations are not shown here: they are in the JSON report only, labelled as address-space layout.
#include <fmt/core.h>

#include "analysis/format.h"
#include "analysis/render_text_parts.h"

namespace gmt::analysis {
namespace {

std::string device_name(int64_t device) {
  return device >= 0 ? fmt::format("device {}", device) : std::string("host memory");
}

std::string count_of(uint64_t count, const char* singular, const char* plural_form) {
  return fmt::format("{} {}", count, count == 1 ? singular : plural_form);
}

std::string heap_space_line(const HeapSpace& space) {
  if (space.reserved_bytes == 0) return "no segment live";
  std::string line = fmt::format("{} free in holes of {} reserved in {}", format_bytes(space.free_bytes),
                                 format_bytes(space.reserved_bytes), count_of(space.segments, "segment", "segments"));
  if (space.free_bytes == 0) return line;
  const double ratio = 1.0 - static_cast<double>(space.largest_free_bytes) / static_cast<double>(space.free_bytes);
  return line + fmt::format(", largest hole {} (ratio {:.2f})", format_bytes(space.largest_free_bytes), ratio);
}

std::string pool_name(const PoolUsage& pool) {
  const std::string handle = format_pc(static_cast<uint64_t>(pool.pool));
  if (pool.kind == "graph") return fmt::format("graph memory pool of {}", device_name(pool.device));
  if (pool.kind == "unrecorded") {
    return fmt::format("a pool on {} the trace did not name (cudaMallocFromPoolAsync)", device_name(pool.device));
  }
  if (pool.kind == "default") {
    return pool.pool == 0 ? fmt::format("current pool of {} (cudaMallocAsync)", device_name(pool.device))
                          : fmt::format("pool {} on {} (the device's current pool)", handle, device_name(pool.device));
  }
  return fmt::format("pool {} on {}", handle, device_name(pool.device));
}

}  // namespace

void append_heap_fragmentation(std::string& out, const Report& report) {
  if (report.heap_fragmentation.empty()) return;
  out += "\nFragmentation inside heaps (free bytes in holes between live blocks; ratio 1 - largest hole / free)\n";
  for (const HeapFragmentation& heap : report.heap_fragmentation) {
    out += fmt::format("  {} on {}\n", heap.allocator, device_name(heap.device));
    out += fmt::format("    at its peak ({} held at {}): {}\n", format_bytes(heap.peak_held_bytes),
                       format_duration(heap.peak_time_ns), heap_space_line(heap.at_peak));
    out += fmt::format("    at the end ({} held): {}\n", format_bytes(heap.at_end.held_bytes),
                       heap_space_line(heap.at_end));
  }
}

void append_pools(std::string& out, const Report& report) {
  if (!report.pools || report.pools->empty()) return;
  out += "\nStream-ordered pools (used: the live requested bytes of the pool's allocations in the trace; reserved: "
         "sampled from the driver)\n";
  for (const PoolUsage& pool : *report.pools) {
    out += fmt::format("  {}\n", pool_name(pool));
    if (pool.used_from_events) {
      out += fmt::format("    used      peak {} at {}; {} at the end of the trace ({} of {} live)\n",
                         format_bytes(pool.peak_used_bytes), format_duration(pool.peak_used_time_ns),
                         format_bytes(pool.last_used_bytes), pool.live_allocations,
                         count_of(pool.allocations, "allocation", "allocations"));
    } else if (pool.samples > 0) {
      out +=
          fmt::format("    used      sampled (its allocations are not in the trace): peak {}, {} at the last sample\n",
                      format_bytes(pool.peak_used_bytes), format_bytes(pool.last_used_bytes));
    }
    if (pool.samples == 0) {
      out += "    reserved  not sampled\n";
      continue;
    }
    out += fmt::format("    reserved  sampled {}: peak {}, {} at the last sample ({})\n",
                       count_of(pool.samples, "time", "times"), format_bytes(pool.peak_reserved_bytes),
                       format_bytes(pool.last_reserved_bytes), format_duration(pool.last_sample_time_ns));
    out += fmt::format("    reserved but unused  at most {} at {}\n", format_bytes(pool.max_unused_bytes),
                       format_duration(pool.max_unused_time_ns));
  }
}

}  // namespace gmt::analysis
