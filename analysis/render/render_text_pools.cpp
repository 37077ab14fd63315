// The text report's fragmentation where it fails allocations: inside the framework heaps whose layout the trace
// shows (holes between live blocks, heap_fragmentation.h) and in the stream-ordered pools, whose layout the driver
// hides (reserved minus used; pools.h). docs/analysis.md defines every number. Address gaps between the driver's
// allocations are not shown here: they are in the JSON report only, labelled as address-space layout.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "analysis/format.h"
#include "analysis/render/render_text_parts.h"

namespace gmt::analysis {
namespace {

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

// The live blocks that pin the holes at one moment, most free bytes pinned first: where a block that outlives its
// neighbours keeps a segment from being given back.
void append_pins(std::string& out, const std::vector<HeapPinGroup>& groups, const RenderOptions& options) {
  if (groups.empty()) return;
  out += "      holes pinned by live blocks (in segments with free bytes), most free first:\n";
  const size_t shown = std::min({groups.size(), options.top, kTextStacksPerMoment});
  for (size_t i = 0; i < shown; ++i) {
    const HeapPinGroup& group = groups[i];
    const std::string amount =
        fmt::format("{} in {} {} {} free in {}", format_bytes(group.bytes), count_of(group.blocks, "block", "blocks"),
                    group.blocks == 1 ? "pins" : "pin", format_bytes(group.free_bytes),
                    count_of(group.segments, "segment", "segments"));
    out += fmt::format("        {:<52} {}\n", amount, one_line_stack(group.stack));
  }
  if (groups.size() > shown) {
    out += fmt::format("        ... {} (--format json has them all)\n",
                       count_of(groups.size() - shown, "more call stack", "more call stacks"));
  }
}

double holes_ratio(uint64_t free_bytes, uint64_t largest_free_bytes) {
  return free_bytes == 0 ? 0.0 : 1.0 - static_cast<double>(largest_free_bytes) / static_cast<double>(free_bytes);
}

// The heap over time as the totals' line (render_text_over_time.cpp): free bytes in holes, and the ratio where it
// ever rose above 0. Each bucket is the heap at its end; each mark the highest of its buckets.
void append_heap_over_time(std::string& out, const HeapFragmentation& heap) {
  std::vector<TimelineBucket> free_bytes;
  std::vector<TimelineBucket> ratio;  // in millionths, for the sparkline
  const HeapBucket* most_free = nullptr;
  const HeapBucket* worst = nullptr;
  uint64_t worst_millionths = 0;
  for (const HeapBucket& bucket : heap.over_time) {
    free_bytes.push_back(TimelineBucket{bucket.time_ns, bucket.free_bytes, bucket.free_bytes});
    const double r = holes_ratio(bucket.free_bytes, bucket.largest_free_bytes);
    const uint64_t millionths = static_cast<uint64_t>(std::llround(r * 1e6));
    ratio.push_back(TimelineBucket{bucket.time_ns, millionths, millionths});
    if (!most_free || bucket.free_bytes > most_free->free_bytes) most_free = &bucket;
    if (millionths > worst_millionths) {
      worst = &bucket;
      worst_millionths = millionths;
    }
  }
  if (!most_free || most_free->free_bytes == 0) return;
  const int64_t end = heap.bucket_ns * static_cast<int64_t>(heap.over_time.size());
  out += fmt::format("    over time (0 to {}, the heap at the end of each {}, highest per mark)\n",
                     format_duration(end), format_duration(heap.bucket_ns));
  out += fmt::format("      free in holes  {}  up to {} at {}\n", sparkline(free_bytes, 60),
                     format_bytes(most_free->free_bytes), format_duration(most_free->time_ns));
  if (worst) {
    out += fmt::format("      ratio          {}  up to {:.2f} at {}\n", sparkline(ratio, 60),
                       holes_ratio(worst->free_bytes, worst->largest_free_bytes), format_duration(worst->time_ns));
  }
}

}  // namespace

void append_heap_fragmentation(std::string& out, const Report& report, const RenderOptions& options) {
  if (report.heap_fragmentation.empty()) return;
  out += "\nFragmentation inside heaps (free bytes in holes between live blocks; ratio 1 - largest hole / free)\n";
  for (const HeapFragmentation& heap : report.heap_fragmentation) {
    out += fmt::format("  {} on {}\n", heap.allocator, device_name(heap.device));
    out += fmt::format("    at its peak ({} held at {}): {}\n", format_bytes(heap.peak_held_bytes),
                       format_duration(heap.peak_time_ns), heap_space_line(heap.at_peak));
    append_pins(out, heap.pinned_at_peak, options);
    out += fmt::format("    at the end ({} held): {}\n", format_bytes(heap.at_end.held_bytes),
                       heap_space_line(heap.at_end));
    append_pins(out, heap.pinned_at_end, options);
    append_heap_over_time(out, heap);
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
    // A lower bound: the driver's figure is read only at samples (pools.h); never below the used peak.
    out += fmt::format("    reserved  sampled {}: peak at least {}{}, {} at the last sample ({})\n",
                       count_of(pool.samples, "time", "times"), format_bytes(pool.peak_reserved_bytes),
                       pool.peak_reserved_from_used ? fmt::format(" (the used peak; the samples saw at most {})",
                                                                  format_bytes(pool.sampled_peak_reserved_bytes))
                                                    : "",
                       format_bytes(pool.last_reserved_bytes), format_duration(pool.last_sample_time_ns));
    out += fmt::format("    reserved but unused  at most {} at {}\n", format_bytes(pool.max_unused_bytes),
                       format_duration(pool.max_unused_time_ns));
  }
}

}  // namespace gmt::analysis
