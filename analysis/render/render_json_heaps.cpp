// The JSON report's memory layouts: address-space gaps per device, fragmentation inside framework heaps and what
// they cached at exit, stream-ordered pools (docs/analysis.md). Split from render_json.cpp; render.h documents the
// shape.
#include <nlohmann/json.hpp>

#include "analysis/format.h"
#include "analysis/render/render_json_parts.h"

namespace gmt::analysis {
namespace {

using Json = nlohmann::ordered_json;

Json heap_space_json(const HeapSpace& space) {
  return Json{{"segments", space.segments},
              {"reserved_bytes", space.reserved_bytes},
              {"held_bytes", space.held_bytes},
              {"free_bytes", space.free_bytes},
              {"largest_free_bytes", space.largest_free_bytes}};
}

// The live blocks pinning a heap's holes at one moment, by call stack (HeapPinGroup).
Json heap_pins_json(const std::vector<HeapPinGroup>& groups) {
  Json list = Json::array();
  for (const HeapPinGroup& group : groups) {
    Json item{{"blocks", group.blocks},
              {"bytes", group.bytes},
              {"segments", group.segments},
              {"free_bytes", group.free_bytes},
              {"stack_id", group.stack.id},
              {"stack_ids", group.stack_ids},
              {"stack_missing", group.stack.missing},
              {"stack", call_stack_json(group.stack)}};
    add_stack_view(item, group.stack);
    list.push_back(std::move(item));
  }
  return list;
}

}  // namespace

Json device_fragmentation_json(const std::vector<DeviceFragmentation>& devices) {
  Json list = Json::array();
  for (const DeviceFragmentation& device : devices) {
    // Virtual-address gaps between the driver's allocations, not fragmentation that fails an allocation: the
    // driver maps physical pages anywhere in the address space (heap_fragmentation[] is where that lives).
    list.push_back(Json{{"device", device.device},
                        {"measures", "address_space_layout"},
                        {"at_peak", fragmentation_json(device.at_peak)},
                        {"at_end", fragmentation_json(device.at_end)}});
  }
  return list;
}

Json heap_fragmentation_json(const std::vector<HeapFragmentation>& heaps) {
  Json list = Json::array();
  for (const HeapFragmentation& heap : heaps) {
    Json over_time = Json::array();
    for (const HeapBucket& bucket : heap.over_time) {
      over_time.push_back(Json{{"time_ns", bucket.time_ns},
                               {"reserved_bytes", bucket.reserved_bytes},
                               {"held_bytes", bucket.held_bytes},
                               {"free_bytes", bucket.free_bytes},
                               {"largest_free_bytes", bucket.largest_free_bytes}});
    }
    list.push_back(Json{{"source", heap.source},
                        {"allocator", heap.allocator},
                        {"device", heap.device},
                        {"peak_held_bytes", heap.peak_held_bytes},
                        {"peak_time_ns", heap.peak_time_ns},
                        {"at_peak", heap_space_json(heap.at_peak)},
                        {"at_end", heap_space_json(heap.at_end)},
                        {"pinned_at_peak", heap_pins_json(heap.pinned_at_peak)},
                        {"pinned_at_end", heap_pins_json(heap.pinned_at_end)},
                        {"bucket_ns", heap.bucket_ns},
                        {"over_time", std::move(over_time)}});
  }
  return list;
}

Json pools_json(const std::optional<std::vector<PoolUsage>>& pools) {
  if (!pools) return Json(nullptr);  // the trace has no pool_usage table
  Json list = Json::array();
  for (const PoolUsage& pool : *pools) {
    Json series = Json::array();  // reserved (sampled) and used (exact when used_from_events) at the samples
    for (const PoolSample& sample : pool.series) {
      series.push_back(Json{
          {"time_ns", sample.time_ns},
          {"reserved_bytes", sample.reserved_bytes},
          {"used_bytes", sample.used_bytes},
          {"unused_bytes", sample.reserved_bytes > sample.used_bytes ? sample.reserved_bytes - sample.used_bytes : 0}});
    }
    list.push_back(Json{{"pool", format_pc(static_cast<uint64_t>(pool.pool))},  // a handle: hex like pcs
                        {"device", pool.device},
                        {"samples", pool.samples},
                        {"peak_reserved_bytes", pool.peak_reserved_bytes},  // a lower bound
                        {"sampled_peak_reserved_bytes", pool.sampled_peak_reserved_bytes},
                        {"peak_reserved_from_used", pool.peak_reserved_from_used},
                        {"peak_used_bytes", pool.peak_used_bytes},
                        {"last_reserved_bytes", pool.last_reserved_bytes},
                        {"last_used_bytes", pool.last_used_bytes},
                        {"max_unused_bytes", pool.max_unused_bytes},
                        {"max_unused_time_ns", pool.max_unused_time_ns},
                        {"kind", pool.kind},
                        {"used_from_events", pool.used_from_events},
                        {"peak_used_time_ns", pool.peak_used_time_ns},
                        {"end_used_bytes", pool.last_used_bytes},  // at the end of the trace when from events
                        {"allocations", pool.allocations},
                        {"live_allocations", pool.live_allocations},
                        {"reserved_sampled", pool.samples > 0},
                        {"last_sample_time_ns", pool.last_sample_time_ns},
                        {"series", series}});
  }
  return list;
}

Json heap_space_json(const std::optional<HeapSpace>& space) {
  if (!space) return nullptr;
  return Json{{"segments", space->segments},
              {"reserved_bytes", space->reserved_bytes},
              {"held_bytes", space->held_bytes},
              {"free_bytes", space->free_bytes},
              {"largest_free_bytes", space->largest_free_bytes}};
}

// Framework heaps at exit (heaps.h): the reservation each allocator still held, apart from the leaks.
Json cached_at_exit_json(const Report& report) {
  Json heaps = Json::array();
  for (const HeapAtExit& heap : report.heaps) {
    const std::string source = heap.source == kXlaArenaSource
                                   ? std::string("xla_arena")
                                   : std::string(schema::to_string(static_cast<schema::Source>(heap.source)));
    heaps.push_back(Json{{"source", source},
                         {"allocator", heap.allocator},
                         {"reserved_bytes", heap.reserved_bytes},
                         {"reserved_allocations", heap.reserved_allocations},
                         {"segments", heap.segments},
                         {"segment_bytes", heap.segment_bytes},
                         {"held_bytes", heap.held_bytes},
                         {"held_blocks", heap.held_blocks},
                         {"cached", heap.cached()},
                         {"blocks_recorded", heap.blocks_recorded},
                         {"in_leaks", heap.in_leaks},
                         {"opaque", heap.opaque},
                         {"note", optional_text(heap.note)}});
  }
  return Json{{"bytes", report.totals.cached_at_exit_bytes},
              {"allocations", report.totals.cached_at_exit_allocations},
              {"verdict_complete", leak_verdict_complete(report)},
              {"listed_leaks_exact", listed_leaks_exact(report)},
              {"heaps", std::move(heaps)}};
}

}  // namespace gmt::analysis
