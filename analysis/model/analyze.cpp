#include "analysis/model/analyze.h"

#include "analysis/model/allocators.h"
#include "analysis/model/breakdown.h"
#include "analysis/model/heap_fragmentation.h"
#include "analysis/model/heaps.h"
#include "analysis/model/imported.h"
#include "analysis/model/live_memory.h"
#include "analysis/model/over_time.h"
#include "analysis/model/pools.h"
#include "analysis/model/ranges.h"
#include "analysis/model/suppressions.h"
#include "analysis/model/tensor_blocks.h"
#include "analysis/model/verify.h"
#include "analysis/read/devices.h"
#include "analysis/read/events.h"
#include "analysis/read/salvage.h"
#include "analysis/read/stacks.h"
#include "analysis/read/trace_info.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_set>
#include <unordered_map>

#include <fmt/core.h>

namespace gmt::analysis {
namespace {

using schema::Api;
using schema::EventKind;
using schema::MemoryKind;

bool is_counted(MemoryKind kind) {
  return std::find(kCountedKinds.begin(), kCountedKinds.end(), kind) != kCountedKinds.end();
}

template <typename T>
void insert_sorted_unique(std::vector<T>& values, T value) {
  auto at = std::lower_bound(values.begin(), values.end(), value);
  if (at == values.end() || *at != value) values.insert(at, value);
}

// What makes two stacks the same to a reader: per frame, function, file and line when symbolized, else the
// pc. Frames are separated by a byte that appears in none of them.
std::string source_key(const Stack& stack) {
  if (stack.frames.empty()) return "#" + std::to_string(stack.id);  // no frames: only the id tells them apart
  std::string key;
  for (const Frame& frame : stack.frames) {
    if (frame.python) {  // no pc to fall back on: the names are the frame, also without a line
      key += "py\x1f" + frame.function.value_or("") + '\x1f' + frame.file.value_or("") + '\x1f' +
             std::to_string(frame.line.value_or(0));
    } else if (frame.function && frame.file && frame.line) {
      key += *frame.function + '\x1f' + *frame.file + '\x1f' + std::to_string(*frame.line);
    } else {
      key += "pc:" + std::to_string(frame.pc);
    }
    key += '\x1e';
  }
  return key;
}

}  // namespace

// One pass over the events of one set in time order; `order` says how that order is obtained
// (analysis/read/ordered_events.h). In the tensor-block pass, blocks are accounted as device memory (so that live
// bytes, peaks, growth and ranges treat them exactly as device memory); tensor_blocks.cpp names them again.
static Report analyze_events(const TraceFile& trace, const AnalyzeOptions& options, EventOrder order,
                             size_t window, EventSet set, HeapPass* heaps) {
  const bool blocks = set != EventSet::CudaLevel;
  // The AppLevel pass leaves out the CUDA-level memory that backs a heap: its addresses and VMM handles, until
  // freed, so that their frees are not unmatched.
  HeapBacking* backing = set == EventSet::CudaLevel && heaps ? &heaps->backing : nullptr;
  const HeapBacking* backed = set == EventSet::AppLevel && heaps ? &heaps->backing : nullptr;
  std::unordered_set<uint64_t> backing_addresses;
  std::unordered_set<uint64_t> backing_handles;
  auto accounted_kind = [blocks](MemoryKind kind) {
    return blocks && is_block_kind(kind) ? MemoryKind::Device : kind;
  };
  Report report;
  read_trace_info(trace, report.trace);
  report.devices = read_devices(trace);
  ImportedTracker imported;  // other processes' memory opened here: kept apart from live bytes
  Totals& totals = report.totals;

  std::optional<int64_t> origin = lenient_meta_int(trace, schema::meta::kStartMonotonicNs);
  std::optional<int64_t> last_event_time;
  std::unordered_map<uint64_t, LiveAllocation> live;
  LiveBytes live_bytes;
  VmmState vmm;
  OverTimeTracker over_time;  // timeline, growth, fragmentation: sees every change of live bytes
  PoolTracker pools;          // stream-ordered pools' exact used bytes (pools.h)
  HeapFragmentationTracker heap_fragmentation(origin.value_or(0));  // holes inside heaps (AppLevel pass)
  if (origin) {
    if (auto end = lenient_meta_int(trace, schema::meta::kEndMonotonicNs)) heap_fragmentation.expect_end(*end);
  }
  BreakdownTracker breakdown(&over_time);  // by thread, stream and module; passes every change on
  live_bytes.set_observer(&breakdown);
  RangeTracker ranges(trace, options.filters, report.trace.pid);  // NVTX ranges (ranges.h)
  EventFilter filter(trace, options.filters, report.trace.pid, &ranges);  // report's filters (filters.h)

  // Time order is what matters for live bytes; id breaks ties in recording order (see the schema):
  // EventReader hands the rows out ordered by (time_ns, id).
  const int64_t segment_alloc = static_cast<int64_t>(EventKind::SegmentAlloc);
  const int64_t segment_free = static_cast<int64_t>(EventKind::SegmentFree);
  uint64_t events_estimated = 0;
  if (options.progress) events_estimated = highest_event_id(trace);
  EventReader events(trace, set, order, window);
  while (events.step()) {
    const EventRow& e = events.row();
    ++report.trace.event_count;
    if (options.progress && report.trace.event_count % 65536 == 0) {
      options.progress(report.trace.event_count, events_estimated);
    }
    const int64_t time_ns = e.time_ns;
    if (!origin) {  // no recorded start: the first event is time zero
      origin = time_ns;
      heap_fragmentation.set_origin(time_ns);
    }
    last_event_time = time_ns;
    const int64_t kind = e.kind;
    const uint64_t address = e.address;
    const int64_t size = e.size;
    const int64_t thread_id = e.thread_id;
    const int64_t event_id = e.id;
    const int64_t source = e.source;
    const bool heap_event = is_heap_source(source);
    ranges.advance(time_ns);
    if (heap_event && (kind == segment_alloc || kind == segment_free)) {  // a heap's segment: not memory itself
      if (backing) backing->on_segment(source, kind == segment_alloc, address, size < 0 ? 0 : uint64_t(size));
      if (heaps && set == EventSet::AppLevel) {
        heap_fragmentation.before_segment(heaps->layout, source, e.device, time_ns);
        heaps->layout.on_segment(source, kind == segment_alloc, address, size < 0 ? 0 : uint64_t(size),
                                 e.device, e.api == Api::torchSegmentMap);
      }
      continue;
    }
    if (backed && !heap_event) {
      const uint64_t handle = e.handle;
      if (kind == static_cast<int64_t>(EventKind::Alloc) && backed->backing_source(event_id) != 0) {
        backing_addresses.insert(address);
        continue;
      }
      if (kind == static_cast<int64_t>(EventKind::Free) && backing_addresses.erase(address) > 0) continue;
      if (kind == static_cast<int64_t>(EventKind::VmmCreate) && backed->backing_source(event_id) != 0) {
        backing_handles.insert(handle);
        continue;
      }
      if (kind == static_cast<int64_t>(EventKind::VmmMap) && backing_handles.count(handle) > 0) continue;
      if (kind == static_cast<int64_t>(EventKind::VmmRelease) && backing_handles.erase(handle) > 0) continue;
    }
    if (heaps && set == EventSet::AppLevel && heap_event &&
        (kind == static_cast<int64_t>(EventKind::Alloc) || kind == static_cast<int64_t>(EventKind::Free))) {
      heap_fragmentation.on_block(heaps->layout, source, e.device,
                                  kind == static_cast<int64_t>(EventKind::Alloc), address,
                                  size < 0 ? 0 : static_cast<uint64_t>(size), e.stack_id, time_ns);
    }
    const bool imported_open = kind == static_cast<int64_t>(EventKind::Alloc) &&
                               e.memory_kind == MemoryKind::IpcImported;
    if (filter.active() && !filter.accept(kind, time_ns, thread_id, e.device, address, size,
                                          e.handle, imported_open)) {
      continue;
    }

    if (imported_open) {
      imported.on_open(address, size < 0 ? 0 : static_cast<uint64_t>(size), e.device,
                       e.stack_id, e.api, time_ns);
    } else if (kind == static_cast<int64_t>(EventKind::Alloc)) {
      if (size < 0 || (address == 0 && size != 0)) {
        ++totals.inconsistencies;
        continue;
      }
      ++totals.allocations;
      totals.allocated_bytes += static_cast<uint64_t>(size);
      ranges.on_alloc(thread_id, address, static_cast<uint64_t>(size), e.stack_id,
                      is_counted(accounted_kind(e.memory_kind)));
      const uint32_t attribution = breakdown.on_alloc(e.thread_id, e.stream,
                                                      e.stack_id, static_cast<uint64_t>(size));
      if (address == 0) continue;  // cudaMalloc(&p, 0) may succeed with p == NULL: nothing becomes live
      LiveAllocation allocation{static_cast<uint64_t>(size),
                                e.stack_id,
                                accounted_kind(e.memory_kind),
                                e.device,
                                time_ns,
                                e.api,
                                attribution,
                                event_id};
      if (!is_counted(allocation.memory_kind)) ++totals.inconsistencies;
      auto [it, inserted] = live.try_emplace(address, allocation);
      if (!inserted) {
        // The old allocation's free was never recorded; the address can only be handed out again after it.
        ++totals.inconsistencies;
        live_bytes.remove(it->second, address, time_ns);
        it->second = allocation;
      }
      live_bytes.add(allocation, address, time_ns);
      pools.on_alloc(allocation.api, e.handle, allocation.device, address,
                     allocation.size, time_ns);
      if (backing && !heap_event) backing->on_cuda_alloc(event_id, address, allocation.size);
    } else if (kind == static_cast<int64_t>(EventKind::Free)) {
      if (address == 0) continue;  // cudaFree(0) frees nothing; apps call it to create the context
      // An IPC close: the exporter's memory, never a free of this process's (even when its open was not seen).
      if (imported.on_close(address, time_ns) ||
          e.memory_kind == MemoryKind::IpcImported) {
        continue;
      }
      auto it = live.find(address);
      if (it == live.end()) {
        ++totals.unmatched_frees;
        continue;
      }
      ++totals.frees;
      if (backing) backing->on_cuda_free(address);
      ranges.on_free(address);
      live_bytes.remove(it->second, address, time_ns);
      live.erase(it);
      pools.on_free(address, time_ns);
    } else if (kind == static_cast<int64_t>(EventKind::PoolCreate)) {
      pools.on_pool_create(address, e.device);
    } else if (kind == static_cast<int64_t>(EventKind::AllocFailed)) {
      ++totals.failed_allocations;
      AllocFailure failure;
      failure.event_id = e.id;
      failure.time_ns = time_ns;  // made relative below, once the origin is certain
      failure.api = e.api;
      failure.memory_kind = e.memory_kind;
      failure.device = e.device;
      if (size < 0) {
        ++totals.inconsistencies;
      } else {
        failure.requested_bytes = static_cast<uint64_t>(size);
      }
      failure.stack.id = e.stack_id;
      failure.error = e.error;
      failure.device_free = e.device_free;
      failure.device_total = e.device_total;
      if (heap_event) {  // a block the heap could not hand out: its space then says why
        failure.heap_source = source;
        failure.allocator = heap_allocator_name(source);
        if (heaps) failure.heap = heaps->layout.space(source, failure.device);
      }
      report.failures.push_back(std::move(failure));
      over_time.on_failure(report.failures.size() - 1, report.failures.back().device, time_ns);
    } else if (kind == static_cast<int64_t>(EventKind::VmmImport)) {
      imported.on_vmm_import(e.handle, e.device,
                             e.stack_id, e.api);
    } else if (kind >= static_cast<int64_t>(EventKind::VmmCreate) &&
               kind <= static_cast<int64_t>(EventKind::VmmUnmap)) {
      // Mappings and releases of imported handles are the exporter's memory: ImportedTracker's, not VmmState's.
      const uint64_t handle = e.handle;
      if ((kind == static_cast<int64_t>(EventKind::VmmMap) &&
           imported.on_vmm_map(handle, address, size < 0 ? 0 : static_cast<uint64_t>(size), time_ns)) ||
          (kind == static_cast<int64_t>(EventKind::VmmUnmap) && imported.on_vmm_unmap(address, time_ns)) ||
          (kind == static_cast<int64_t>(EventKind::VmmRelease) && imported.on_vmm_release(handle))) {
        continue;
      }
      LiveAllocation allocation{size < 0 ? 0 : static_cast<uint64_t>(size), e.stack_id,
                                MemoryKind::VmmPhysical, e.device, time_ns,
                                e.api, 0, event_id};
      if (backing) {
        if (kind == static_cast<int64_t>(EventKind::VmmCreate)) backing->on_vmm_create(event_id, handle);
        if (kind == static_cast<int64_t>(EventKind::VmmMap)) backing->on_vmm_map(address, allocation.size, handle);
        if (kind == static_cast<int64_t>(EventKind::VmmUnmap)) backing->on_vmm_unmap(address);
      }
      if (size < 0) ++totals.inconsistencies;
      if (kind == static_cast<int64_t>(EventKind::VmmCreate)) {
        allocation.attribution = breakdown.on_alloc(e.thread_id, e.stream,
                                                    e.stack_id, allocation.size);
      }
      vmm.apply(static_cast<EventKind>(kind), e.handle, address, allocation,
                live_bytes, totals);
    }
    // Stream, synchronize, other pool and address-range events do not change live memory.
  }

  const int64_t start = origin.value_or(0);
  // Wrapping subtraction: a damaged trace may hold times far from the start, and signed overflow is UB.
  auto relative = [start](int64_t absolute) {
    return static_cast<int64_t>(static_cast<uint64_t>(absolute) - static_cast<uint64_t>(start));
  };

  if (auto end = lenient_meta_int(trace, schema::meta::kEndMonotonicNs)) {
    report.trace.duration_ns = relative(*end);
  } else {
    report.trace.duration_from_events = true;
    report.trace.duration_ns = last_event_time ? relative(*last_event_time) : 0;
  }

  report.filters = filter.finish(report.trace.duration_ns, totals.allocations + totals.failed_allocations);

  totals.peak_bytes = live_bytes.peak();
  totals.peak_time_ns = totals.peak_bytes == 0 ? 0 : relative(live_bytes.peak_time());
  report.peak_by_kind = live_bytes.peak_by_kind();
  for (MemoryKind kind : kCountedKinds) {
    if (*report.peak_by_kind.find(kind) != 0) {
      *report.peak_time_ns_by_kind.find(kind) = relative(*live_bytes.peak_time_by_kind().find(kind));
    }
  }

  // Physical VMM memory still held at the end leaks like any allocation (keyed apart from addresses).
  vmm.move_live_into(live);
  if (heaps) {
    for (const auto& [address, allocation] : live) {
      if (backing) {
        if (int64_t heap = backing->backing_source(allocation.event_id)) {
          auto& [count, bytes] = heaps->reserved_at_exit[heap];
          ++count;
          bytes += allocation.size;
        }
      }
    }
  }

  // Group what is still live by call stack as the user reads it: stacks whose frames resolve to the same
  // functions and source lines are one group even when their raw pcs differ (an unrolled or duplicated call
  // site). Unsymbolized frames compare by pc. std::map keeps the grouping deterministic.
  StackLoader stacks(trace);
  auto load_stack = [&stacks](int64_t id) -> const Stack& { return stacks.load(id); };
  std::optional<LeakSuppressor> suppressor;
  if (options.suppressions) suppressor.emplace(*options.suppressions, load_stack, source_key);
  std::map<std::string, LeakGroup> groups;
  XlaArenaAtExit xla_arena;  // JAX/XLA's arena is cached at exit, not leaked (allocators.h)
  for (const auto& [address, allocation] : live) {
    if (suppressor && suppressor->suppress(allocation.stack_id, allocation.size)) continue;
    const Stack& stack = stacks.load(allocation.stack_id);
    if (xla_arena.take(allocation.stack_id, stack, allocation.size)) continue;
    LeakGroup& group = groups[source_key(stack)];
    const int64_t when = relative(allocation.time_ns);
    if (group.count == 0 || when < group.first_alloc_ns) group.first_alloc_ns = when;
    if (group.count == 0 || when > group.last_alloc_ns) group.last_alloc_ns = when;
    if (group.count == 0 || allocation.stack_id < group.stack.id) group.stack.id = allocation.stack_id;
    insert_sorted_unique(group.stack_ids, allocation.stack_id);
    group.bytes += allocation.size;
    ++group.count;
    insert_sorted_unique(group.memory_kinds, allocation.memory_kind);
    insert_sorted_unique(group.apis, allocation.api);
    insert_sorted_unique(group.devices, allocation.device);
    totals.leaked_bytes += allocation.size;
    ++totals.leaked_allocations;
    if (uint64_t* leaked = report.leaked_by_kind.find(allocation.memory_kind)) *leaked += allocation.size;
  }

  xla_arena.add_to(report);
  report.leak_groups_total = groups.size();
  report.min_bytes = options.min_bytes;
  for (auto& [stack_id, group] : groups) {
    if (options.min_bytes && group.bytes < *options.min_bytes) {
      ++report.leak_groups_below_min_bytes;
      report.leaked_bytes_below_min_bytes += group.bytes;
      continue;
    }
    report.leaks.push_back(std::move(group));
  }
  std::sort(report.leaks.begin(), report.leaks.end(), [](const LeakGroup& a, const LeakGroup& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    if (a.count != b.count) return a.count > b.count;
    return a.stack.id < b.stack.id;
  });

  for (LeakGroup& group : report.leaks) group.stack = stacks.load(group.stack.id);
  for (AllocFailure& failure : report.failures) {
    failure.time_ns = relative(failure.time_ns);
    failure.stack = stacks.load(failure.stack.id);
  }
  over_time.finish(trace, report, start, options, load_stack, source_key);
  report.pools = pools.finish(trace, start);
  if (heaps && set == EventSet::AppLevel) {
    report.heap_fragmentation =
        heap_fragmentation.finish(heaps->layout, report.trace.duration_ns, load_stack, source_key);
  }
  report.imported = imported.finish(start, load_stack, source_key);
  ranges.finish(report, start, options, load_stack, source_key);
  if (suppressor) report.suppressed = suppressor->results();
  report.breakdown = breakdown.finish(live, load_stack, [&suppressor, &xla_arena](int64_t stack_id) {
    return (suppressor && suppressor->is_suppressed(stack_id)) || xla_arena.is_arena(stack_id);
  });
  return report;
}

// One pass over one set of events, tried in time order from the recording's order with growing windows, then sorted by
// SQLite. `heaps`: filled by the CudaLevel pass, read by the AppLevel pass; nullptr for TensorBlocks.
static Report analyze_event_set(const TraceFile& trace, const AnalyzeOptions& options, EventSet set,
                                HeapPass* heaps) {
  // Each attempt starts from what the CudaLevel pass handed over (nothing, for that pass itself).
  auto attempt = [&](EventOrder order, size_t window) {
    if (heaps && set == EventSet::CudaLevel) *heaps = HeapPass{};
    if (heaps) heaps->layout = HeapLayout{};
    return analyze_events(trace, options, order, window, set, heaps);
  };
  // A trace that says its times follow recording order needs no window; a small one still guards it.
  bool time_ordered = lenient_meta_int(trace, schema::meta::kEventsTimeOrdered).value_or(0) == 1;
  if (time_ordered) {
    try {
      return attempt(EventOrder::RecordingWindow, kSmallEventWindow);
    } catch (const EventsOutOfOrder&) {
    }
  }
  for (size_t window : kEventWindows) {
    try {
      return attempt(EventOrder::RecordingWindow, window);
    } catch (const EventsOutOfOrder&) {
      // Rare: in a trace without events_time_ordered, a thread stalled between its clock read and the
      // recorder's lock for longer than the window, or a trace written in another order. Start over with a larger window, then with SQLite's sort.
    }
  }
  return attempt(EventOrder::SortedBySqlite, 1);
}

Report analyze_trace(const TraceFile& trace, const AnalyzeOptions& options) {
  HeapPass heaps;
  Report report = analyze_event_set(trace, options, EventSet::CudaLevel, &heaps);
  AnalyzeOptions quiet_options = options;
  quiet_options.progress = nullptr;  // one progress indicator per report: the CUDA-level pass's
  if (heaps.backing.any_segment()) {
    // A heap's segments were recorded: what the app held is its blocks, not the CUDA memory behind them.
    apply_app_level(report, analyze_event_set(trace, quiet_options, EventSet::AppLevel, &heaps), heaps);
  }
  add_unrecorded_heaps(report, trace);
  if (meta_flag(trace, schema::meta::kTensorBlocks)) {
    report.tensor_blocks = tensor_block_report(
        analyze_event_set(trace, quiet_options, EventSet::TensorBlocks, nullptr), trace);
  }
  if (has_cross_check(trace)) {
    StackLoader stacks(trace);
    report.cross_check = std::make_shared<const CrossCheck>(
        cross_check_trace(trace, [&stacks](int64_t id) -> const Stack& { return stacks.load(id); }));
  }
  return report;
}

Report analyze_trace_file(const std::string& path, const AnalyzeOptions& options) {
  if (!truncation(path)) {
    try {
      const TraceFile trace = TraceFile::open(path);
      return analyze_trace(trace, options);
    } catch (const TraceDamaged&) {
      // SQLite found the file malformed, at opening or halfway through: salvage what it still holds.
    }
  }
  const SalvagedTrace salvaged = salvage_trace(path);
  const TraceFile trace = TraceFile::open(salvaged.path());
  Report report = analyze_trace(trace, options);
  report.trace.path = path;
  report.trace.complete = false;
  report.trace.salvaged = salvaged.info().summary();
  return report;
}

}  // namespace gmt::analysis
