// The report at block level where framework heaps are recorded (heaps.h; docs/analysis.md "Blocks inside heaps"):
// the CudaLevel pass keeps the device memory's figures, the AppLevel pass says what the app held.
#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <unordered_map>

#include "analysis/model/allocators.h"
#include "analysis/model/failed_requests.h"
#include "analysis/model/heaps.h"

namespace gmt::analysis {
namespace {

HeapAtExit& heap_entry(Report& report, int64_t source) {
  for (HeapAtExit& heap : report.heaps) {
    if (heap.source == source) return heap;
  }
  HeapAtExit heap;
  heap.source = source;
  heap.allocator = heap_allocator_name(source);
  report.heaps.push_back(heap);
  std::sort(report.heaps.begin(), report.heaps.end(),
            [](const HeapAtExit& a, const HeapAtExit& b) { return a.source < b.source; });
  return heap_entry(report, source);
}

std::string dropped_note(uint64_t dropped) {
  return fmt::format("{} event{} lost while recording", dropped, dropped == 1 ? " was" : "s were");
}

// The AppLevel pass counted blocks as device memory: a group of blocks names their kind again.
void name_block_groups(std::vector<LeakGroup>& groups) {
  for (LeakGroup& group : groups) {
    std::vector<schema::MemoryKind> kinds;
    for (schema::Api api : group.apis) {
      if (api == schema::Api::torchBlockAlloc) {
        kinds.push_back(schema::MemoryKind::TensorBlock);
      } else if (api == schema::Api::nvtxMemRegionsRegister || api == schema::Api::cupyBlockAlloc) {
        kinds.push_back(schema::MemoryKind::HeapBlock);
      } else {
        kinds.clear();  // CUDA-level memory too: the kinds as counted stay
        break;
      }
    }
    if (kinds.empty()) continue;
    std::sort(kinds.begin(), kinds.end());
    kinds.erase(std::unique(kinds.begin(), kinds.end()), kinds.end());
    group.memory_kinds = kinds;
  }
}

}  // namespace

void apply_app_level(Report& report, Report app, const HeapPass& heaps) {
  report.trace.event_count = app.trace.event_count;  // every event: the CudaLevel pass skips the heaps' blocks
  Totals& totals = report.totals;
  totals.block_allocations = app.totals.block_allocations;
  totals.block_frees = app.totals.block_frees;
  totals.leaked_bytes = app.totals.leaked_bytes;
  totals.leaked_allocations = app.totals.leaked_allocations;
  report.leaked_by_kind = app.leaked_by_kind;
  report.leaks = std::move(app.leaks);
  name_block_groups(report.leaks);
  report.leak_groups_total = app.leak_groups_total;
  report.leak_groups_below_min_bytes = app.leak_groups_below_min_bytes;
  report.leaked_bytes_below_min_bytes = app.leaked_bytes_below_min_bytes;
  report.suppressed = std::move(app.suppressed);
  report.growth = std::move(app.growth);
  report.ranges = std::move(app.ranges);
  report.breakdown = std::move(app.breakdown);
  report.heap_fragmentation = std::move(app.heap_fragmentation);

  // Peaks: the device's bytes stay CUDA-level; who held them is said at the app's own peak on that device.
  for (DevicePeak& peak : report.peaks) {
    peak.held_bytes = 0;
    peak.stacks.clear();
    peak.stack_groups = 0;
    for (DevicePeak& held : app.peaks) {
      if (held.device != peak.device) continue;
      peak.held_bytes = held.bytes;
      peak.held_time_ns = held.time_ns;
      peak.stacks = std::move(held.stacks);
      peak.stack_groups = held.stack_groups;
    }
  }

  // Failures: the CUDA-level ones keep their labels, with the holders at block level; the heaps' own join them.
  std::unordered_map<int64_t, AllocFailure*> app_failures;
  for (AllocFailure& failure : app.failures) app_failures[failure.event_id] = &failure;
  for (AllocFailure& failure : report.failures) {
    auto held = app_failures.find(failure.event_id);
    if (held != app_failures.end()) failure.top_stacks = std::move(held->second->top_stacks);
  }
  for (AllocFailure& failure : app.failures) {
    if (!failure.heap_source) continue;
    if (failure.heap) failure.label = heap_failure_label(failure.requested_bytes, *failure.heap);
    ++totals.failed_allocations;
    report.failures.push_back(std::move(failure));
  }
  std::stable_sort(report.failures.begin(), report.failures.end(), [](const AllocFailure& a, const AllocFailure& b) {
    return a.time_ns != b.time_ns ? a.time_ns < b.time_ns : a.event_id < b.event_id;
  });
  link_failed_attempts(report);  // one failed request, one failure: its CUDA-level attempts are its evidence

  // Each heap at exit: its reservation (cached, not a leak) and what its blocks held (in the leaks).
  for (const auto& [source, reserved] : heaps.reserved_at_exit) {
    HeapAtExit& heap = heap_entry(report, source);
    heap.reserved_allocations = reserved.first;
    heap.reserved_bytes = reserved.second;
  }
  for (const auto& [source, segments] : heaps.layout.live_segments()) {
    HeapAtExit& heap = heap_entry(report, source);
    heap.segments = segments.first;
    heap.segment_bytes = segments.second;
  }
  for (const auto& [source, blocks] : heaps.layout.live_blocks()) {
    HeapAtExit& heap = heap_entry(report, source);
    heap.held_blocks = blocks.first;
    heap.held_bytes = blocks.second;
  }
  for (HeapAtExit& heap : report.heaps) {
    if (heap.opaque) continue;  // JAX/XLA's arena: the CudaLevel pass counted it already (allocators.h)
    if (report.trace.dropped_events > 0) {
      heap.blocks_recorded = false;
      heap.note = dropped_note(report.trace.dropped_events);
    }
    if (!heap.cached()) continue;
    totals.cached_at_exit_bytes += heap.reserved_bytes;
    totals.cached_at_exit_allocations += heap.reserved_allocations;
  }
}

void add_unrecorded_heaps(Report& report, const TraceFile& trace) {
  // meta tensor_blocks "0": PyTorch's caching allocator was used but its blocks could not be recorded. Its segments
  // are then CUDA-level allocations like any other: the leak groups whose stacks go through PyTorch say how much.
  if (trace.meta(schema::meta::kTensorBlocks) != std::optional<std::string>("0")) return;
  const int64_t torch = static_cast<int64_t>(schema::Source::TorchAllocator);
  HeapAtExit& heap = heap_entry(report, torch);
  if (heap.reserved_allocations > 0 || heap.segments > 0) return;  // its segments were recorded after all
  heap.blocks_recorded = false;
  heap.in_leaks = true;
  heap.note = trace.meta(schema::meta::kTensorBlocksNote).value_or("the trace does not say why");
  for (const AllocatorFinding& allocator : name_allocators(report.leaks)) {
    if (allocator.id.rfind("pytorch", 0) != 0) continue;
    heap.reserved_bytes += allocator.leaked_bytes;
    heap.reserved_allocations += allocator.leaked_allocations;
  }
}

}  // namespace gmt::analysis
