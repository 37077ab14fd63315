#include "analysis/model/event_pass.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "analysis/model/allocators.h"
#include "analysis/model/breakdown.h"
#include "analysis/model/heap_fragmentation.h"
#include "analysis/model/heaps.h"
#include "analysis/model/imported.h"
#include "analysis/model/live_memory.h"
#include "analysis/model/over_time.h"
#include "analysis/model/pools.h"
#include "analysis/model/ranges.h"
#include "analysis/model/stack_view.h"
#include "analysis/model/suppressions.h"
#include "analysis/read/devices.h"
#include "analysis/read/stacks.h"
#include "analysis/read/trace_info.h"

namespace gmt::analysis {
namespace {

using schema::EventKind;
using schema::MemoryKind;

bool is_counted(MemoryKind kind) {
  return std::find(kCountedKinds.begin(), kCountedKinds.end(), kind) != kCountedKinds.end();
}

constexpr int64_t code(EventKind kind) { return static_cast<int64_t>(kind); }

uint64_t size_or_zero(int64_t size) { return size < 0 ? 0 : static_cast<uint64_t>(size); }

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

Report trace_report(const TraceFile& trace) {
  Report report;
  read_trace_info(trace, report.trace);
  report.devices = read_devices(trace);
  return report;
}

class EventPass {
 public:
  EventPass(const TraceFile& trace, const AnalyzeOptions& options, EventSet set, HeapPass* heaps);
  EventPass(const EventPass&) = delete;  // the trackers point at each other
  EventPass& operator=(const EventPass&) = delete;

  void on_event(const EventRow& e);
  Report finish();

 private:
  // Event kinds, each with its handler. Returning early is an event that changes nothing further.
  void on_heap_segment(const EventRow& e);
  bool is_heap_backing(const EventRow& e);
  void on_alloc(const EventRow& e, bool heap_event);
  void on_free(const EventRow& e);
  void on_alloc_failed(const EventRow& e, bool heap_event);
  void on_vmm(const EventRow& e);
  // At the end: what is still live, grouped by call stack as the user reads it.
  void group_leaks(StackLoader& stacks, std::optional<LeakSuppressor>& suppressor, XlaArenaAtExit& xla_arena,
                   int64_t start);

  MemoryKind accounted_kind(MemoryKind kind) const {
    return blocks_ && is_block_kind(kind) ? MemoryKind::Device : kind;
  }
  // Wrapping subtraction: a damaged trace may hold times far from the start, and signed overflow is UB.
  static int64_t relative(int64_t absolute, int64_t start) {
    return static_cast<int64_t>(static_cast<uint64_t>(absolute) - static_cast<uint64_t>(start));
  }

  const TraceFile& trace_;
  const AnalyzeOptions& options_;
  const EventSet set_;
  const bool blocks_;  // the TensorBlocks or AppLevel pass: blocks count as device memory
  HeapPass* const heaps_;
  // The AppLevel pass leaves out the CUDA-level memory that backs a heap: its addresses and VMM handles, until
  // freed, so that their frees are not unmatched.
  HeapBacking* const backing_;       // CudaLevel: learns which CUDA-level memory backs a heap
  const HeapBacking* const backed_;  // AppLevel: that knowledge, to leave it out
  std::unordered_set<uint64_t> backing_addresses_;
  std::unordered_set<uint64_t> backing_handles_;

  Report report_;
  Totals& totals_ = report_.totals;
  ImportedTracker imported_;  // other processes' memory opened here: kept apart from live bytes
  std::optional<int64_t> origin_;
  std::optional<int64_t> last_event_time_;
  std::unordered_map<uint64_t, LiveAllocation> live_;
  LiveBytes live_bytes_;
  VmmState vmm_;
  OverTimeTracker over_time_;                    // timeline, growth, fragmentation: sees every change of live bytes
  PoolTracker pools_;                            // stream-ordered pools' exact used bytes (pools.h)
  HeapFragmentationTracker heap_fragmentation_;  // holes inside heaps (AppLevel pass)
  BreakdownTracker breakdown_{&over_time_};      // by thread, stream and module; passes every change on
  RangeTracker ranges_;                          // NVTX ranges (ranges.h)
  EventFilter filter_;                           // the report's filters (filters.h)
  uint64_t events_estimated_ = 0;
  // AppLevel: per thread, where its current request to a heap began (failed_requests.h): the event that ended its
  // previous request (a block handed out, or a failure), and the heap's segments it gave back since.
  struct RequestWindow {
    int64_t previous_event_id = 0;
    uint64_t segments_released = 0;
    uint64_t segment_bytes_released = 0;
  };
  std::unordered_map<int64_t, RequestWindow> request_windows_;
  RequestWindow failed_request_window_;  // of the heap failure on_event is handling now
  void track_request_window(const EventRow& e);
  // backward() calls running now (AutogradBegin .. AutogradEnd): call number -> (calling thread, its stack id).
  std::map<int64_t, std::pair<int64_t, int64_t>> backward_calls_;
  void on_autograd(const EventRow& e);
  int64_t backward_link(const EventRow& e) const;
};

EventPass::EventPass(const TraceFile& trace, const AnalyzeOptions& options, EventSet set, HeapPass* heaps)
    : trace_(trace),
      options_(options),
      set_(set),
      blocks_(set != EventSet::CudaLevel),
      heaps_(heaps),
      backing_(set == EventSet::CudaLevel && heaps ? &heaps->backing : nullptr),
      backed_(set == EventSet::AppLevel && heaps ? &heaps->backing : nullptr),
      report_(trace_report(trace)),
      origin_(lenient_meta_int(trace, schema::meta::kStartMonotonicNs)),
      heap_fragmentation_(origin_.value_or(0)),
      ranges_(trace, options.filters, report_.trace.pid),
      filter_(trace, options.filters, report_.trace.pid, &ranges_) {
  if (origin_) {
    if (auto end = lenient_meta_int(trace, schema::meta::kEndMonotonicNs)) heap_fragmentation_.expect_end(*end);
  }
  live_bytes_.set_observer(&breakdown_);
  if (options.progress) events_estimated_ = highest_event_id(trace);
}

void EventPass::on_event(const EventRow& e) {
  ++report_.trace.event_count;
  if (options_.progress && report_.trace.event_count % 65536 == 0) {
    options_.progress(report_.trace.event_count, events_estimated_);
  }
  const int64_t time_ns = e.time_ns;
  if (!origin_) {  // no recorded start: the first event is time zero
    origin_ = time_ns;
    heap_fragmentation_.set_origin(time_ns);
  }
  last_event_time_ = time_ns;
  const int64_t kind = e.kind;
  const bool heap_event = is_heap_source(e.source);
  ranges_.advance(time_ns);
  if (heap_event && set_ == EventSet::AppLevel) track_request_window(e);
  if (heap_event && (kind == code(EventKind::SegmentAlloc) || kind == code(EventKind::SegmentFree))) {
    on_heap_segment(e);  // a heap's segment: not memory itself
    return;
  }
  if (backed_ && !heap_event && is_heap_backing(e)) return;
  if (heaps_ && set_ == EventSet::AppLevel && heap_event &&
      (kind == code(EventKind::Alloc) || kind == code(EventKind::Free))) {
    heap_fragmentation_.on_block(heaps_->layout, e.source, e.device, kind == code(EventKind::Alloc), e.address,
                                 size_or_zero(e.size), e.stack_id, time_ns);
  }
  const bool imported_open = kind == code(EventKind::Alloc) && e.memory_kind == MemoryKind::IpcImported;
  if (filter_.active() &&
      !filter_.accept(kind, time_ns, e.thread_id, e.device, e.address, e.size, e.handle, imported_open)) {
    return;
  }

  if (imported_open) {
    imported_.on_open(e.address, size_or_zero(e.size), e.device, e.stack_id, e.api, time_ns);
  } else if (kind == code(EventKind::Alloc)) {
    on_alloc(e, heap_event);
  } else if (kind == code(EventKind::Free)) {
    on_free(e);
  } else if (kind == code(EventKind::PoolCreate)) {
    pools_.on_pool_create(e.address, e.device);
  } else if (kind == code(EventKind::AllocFailed)) {
    on_alloc_failed(e, heap_event);
  } else if (kind == code(EventKind::AutogradBegin) || kind == code(EventKind::AutogradEnd)) {
    on_autograd(e);
  } else if (kind == code(EventKind::VmmImport)) {
    imported_.on_vmm_import(e.handle, e.device, e.stack_id, e.api);
  } else if (kind >= code(EventKind::VmmCreate) && kind <= code(EventKind::VmmUnmap)) {
    on_vmm(e);
  }
  // Stream, synchronize, other pool and address-range events do not change live memory.
}

// A heap's request on a thread ends with its block (Alloc) or its failure (AllocFailed); what the thread did at the
// CUDA level in between belongs to the next request. Seen before the filters: a window's start is a fact of the
// thread, whatever the report shows.
void EventPass::track_request_window(const EventRow& e) {
  if (e.kind == code(EventKind::Alloc)) {
    request_windows_[e.thread_id] = RequestWindow{e.id, 0, 0};
  } else if (e.kind == code(EventKind::AllocFailed)) {
    RequestWindow& window = request_windows_[e.thread_id];
    failed_request_window_ = window;  // on_alloc_failed's, when the filters keep the failure
    window = RequestWindow{e.id, 0, 0};
  } else if (e.kind == code(EventKind::SegmentFree)) {
    RequestWindow& window = request_windows_[e.thread_id];
    ++window.segments_released;
    window.segment_bytes_released += size_or_zero(e.size);
  }
}

void EventPass::on_autograd(const EventRow& e) {
  if (e.kind == code(EventKind::AutogradBegin)) {
    backward_calls_[static_cast<int64_t>(e.handle)] = {e.thread_id, e.stack_id};
  } else {
    backward_calls_.erase(static_cast<int64_t>(e.handle));
  }
}

// A PyTorch tensor block made on a thread that is not calling backward() while calls run: autograd's worker threads
// (they have no Python frames of their own). With one call running it is that call's; with several, unknown.
int64_t EventPass::backward_link(const EventRow& e) const {
  if (backward_calls_.empty() || e.source != static_cast<int64_t>(schema::Source::TorchAllocator)) return 0;
  for (const auto& [call, caller] : backward_calls_) {
    if (caller.first == e.thread_id) return 0;  // the caller's own allocations carry its Python frames
  }
  if (backward_calls_.size() > 1) return kBackwardCallerUnknown;
  const int64_t stack_id = backward_calls_.begin()->second.second;
  return stack_id > 0 ? stack_id : kBackwardCallerUnknown;
}

void EventPass::on_heap_segment(const EventRow& e) {
  const bool alloc = e.kind == code(EventKind::SegmentAlloc);
  if (backing_) backing_->on_segment(e.source, alloc, e.address, size_or_zero(e.size));
  if (heaps_ && set_ == EventSet::AppLevel) {
    heap_fragmentation_.before_segment(heaps_->layout, e.source, e.device, e.time_ns);
    heaps_->layout.on_segment(e.source, alloc, e.address, size_or_zero(e.size), e.device,
                              e.api == schema::Api::torchSegmentMap);
  }
}

// Whether a CUDA-level event of the AppLevel pass is the memory behind a heap (left out of that pass).
bool EventPass::is_heap_backing(const EventRow& e) {
  const int64_t kind = e.kind;
  if (kind == code(EventKind::Alloc) && backed_->backing_source(e.id) != 0) {
    backing_addresses_.insert(e.address);
    return true;
  }
  if (kind == code(EventKind::Free) && backing_addresses_.erase(e.address) > 0) return true;
  if (kind == code(EventKind::VmmCreate) && backed_->backing_source(e.id) != 0) {
    backing_handles_.insert(e.handle);
    return true;
  }
  if (kind == code(EventKind::VmmMap) && backing_handles_.count(e.handle) > 0) return true;
  if (kind == code(EventKind::VmmRelease) && backing_handles_.erase(e.handle) > 0) return true;
  return false;
}

void EventPass::on_alloc(const EventRow& e, bool heap_event) {
  const uint64_t address = e.address;
  if (e.size < 0 || (address == 0 && e.size != 0)) {
    ++totals_.inconsistencies;
    return;
  }
  const uint64_t size = static_cast<uint64_t>(e.size);
  ++totals_.allocations;
  if (heap_event) ++totals_.block_allocations;
  totals_.allocated_bytes += size;
  ranges_.on_alloc(e.thread_id, address, size, e.stack_id, is_counted(accounted_kind(e.memory_kind)));
  const uint32_t attribution = breakdown_.on_alloc(e.thread_id, e.stream, e.stack_id, size);
  if (address == 0) return;  // cudaMalloc(&p, 0) may succeed with p == NULL: nothing becomes live
  LiveAllocation allocation{size,        e.stack_id, accounted_kind(e.memory_kind),    e.device, e.time_ns, e.api,
                            attribution, e.id,       heap_event ? backward_link(e) : 0};
  if (!is_counted(allocation.memory_kind)) ++totals_.inconsistencies;
  auto [it, inserted] = live_.try_emplace(address, allocation);
  if (!inserted) {
    // The old allocation's free was never recorded; the address can only be handed out again after it.
    ++totals_.inconsistencies;
    live_bytes_.remove(it->second, address, e.time_ns);
    it->second = allocation;
  }
  live_bytes_.add(allocation, address, e.time_ns);
  pools_.on_alloc(allocation.api, e.handle, allocation.device, address, allocation.size, e.time_ns);
  if (backing_ && !heap_event) backing_->on_cuda_alloc(e.id, address, allocation.size);
}

void EventPass::on_free(const EventRow& e) {
  const uint64_t address = e.address;
  if (address == 0) return;  // cudaFree(0) frees nothing; apps call it to create the context
  // An IPC close: the exporter's memory, never a free of this process's (even when its open was not seen).
  if (imported_.on_close(address, e.time_ns) || e.memory_kind == MemoryKind::IpcImported) return;
  auto it = live_.find(address);
  if (it == live_.end()) {
    ++totals_.unmatched_frees;
    return;
  }
  ++totals_.frees;
  if (is_heap_source(e.source)) ++totals_.block_frees;
  if (backing_) backing_->on_cuda_free(address);
  ranges_.on_free(address);
  live_bytes_.remove(it->second, address, e.time_ns);
  live_.erase(it);
  pools_.on_free(address, e.time_ns);
}

void EventPass::on_alloc_failed(const EventRow& e, bool heap_event) {
  ++totals_.failed_allocations;
  AllocFailure failure;
  failure.event_id = e.id;
  failure.time_ns = e.time_ns;  // made relative in finish(), once the origin is certain
  failure.api = e.api;
  failure.memory_kind = e.memory_kind;
  failure.device = e.device;
  if (e.size < 0) {
    ++totals_.inconsistencies;
  } else {
    failure.requested_bytes = static_cast<uint64_t>(e.size);
  }
  failure.stack.id = e.stack_id;
  failure.error = e.error;
  failure.device_free = e.device_free;
  failure.device_total = e.device_total;
  failure.thread_id = e.thread_id;
  if (heap_event) {  // a block the heap could not hand out: its space then says why
    failure.heap_source = e.source;
    failure.allocator = heap_allocator_name(e.source);
    if (heaps_) failure.heap = heaps_->layout.space(e.source, failure.device);
    if (set_ == EventSet::AppLevel) {
      failure.previous_request_event_id = failed_request_window_.previous_event_id;
      failure.segments_released = failed_request_window_.segments_released;
      failure.segment_bytes_released = failed_request_window_.segment_bytes_released;
    }
  }
  report_.failures.push_back(std::move(failure));
  over_time_.on_failure(report_.failures.size() - 1, report_.failures.back().device, e.time_ns);
}

// cuMemCreate, cuMemMap, cuMemUnmap, cuMemRelease: physical memory is live from its creation until released and
// unmapped (live_memory.h VmmState).
void EventPass::on_vmm(const EventRow& e) {
  const int64_t kind = e.kind;
  const uint64_t handle = e.handle;
  const uint64_t address = e.address;
  // Mappings and releases of imported handles are the exporter's memory: ImportedTracker's, not VmmState's.
  if ((kind == code(EventKind::VmmMap) && imported_.on_vmm_map(handle, address, size_or_zero(e.size), e.time_ns)) ||
      (kind == code(EventKind::VmmUnmap) && imported_.on_vmm_unmap(address, e.time_ns)) ||
      (kind == code(EventKind::VmmRelease) && imported_.on_vmm_release(handle))) {
    return;
  }
  LiveAllocation allocation{
      size_or_zero(e.size), e.stack_id, MemoryKind::VmmPhysical, e.device, e.time_ns, e.api, 0, e.id};
  if (backing_) {
    if (kind == code(EventKind::VmmCreate)) backing_->on_vmm_create(e.id, handle);
    if (kind == code(EventKind::VmmMap)) backing_->on_vmm_map(address, allocation.size, handle);
    if (kind == code(EventKind::VmmUnmap)) backing_->on_vmm_unmap(address);
  }
  if (e.size < 0) ++totals_.inconsistencies;
  if (kind == code(EventKind::VmmCreate)) {
    allocation.attribution = breakdown_.on_alloc(e.thread_id, e.stream, e.stack_id, allocation.size);
  }
  vmm_.apply(static_cast<EventKind>(kind), handle, address, allocation, live_bytes_, totals_);
}

Report EventPass::finish() {
  const int64_t start = origin_.value_or(0);
  report_.trace.start_monotonic_ns = origin_;
  if (auto end = lenient_meta_int(trace_, schema::meta::kEndMonotonicNs)) {
    report_.trace.duration_ns = relative(*end, start);
  } else {
    report_.trace.duration_from_events = true;
    report_.trace.duration_ns = last_event_time_ ? relative(*last_event_time_, start) : 0;
  }

  report_.filters = filter_.finish(report_.trace.duration_ns, totals_.allocations + totals_.failed_allocations);

  totals_.peak_bytes = live_bytes_.peak();
  totals_.peak_time_ns = totals_.peak_bytes == 0 ? 0 : relative(live_bytes_.peak_time(), start);
  report_.peak_by_kind = live_bytes_.peak_by_kind();
  for (MemoryKind kind : kCountedKinds) {
    if (*report_.peak_by_kind.find(kind) != 0) {
      *report_.peak_time_ns_by_kind.find(kind) = relative(*live_bytes_.peak_time_by_kind().find(kind), start);
    }
  }

  // Physical VMM memory still held at the end leaks like any allocation (keyed apart from addresses).
  vmm_.move_live_into(live_);
  if (heaps_ && backing_) {
    for (const auto& [address, allocation] : live_) {
      if (int64_t heap = backing_->backing_source(allocation.event_id)) {
        auto& [count, bytes] = heaps_->reserved_at_exit[heap];
        ++count;
        bytes += allocation.size;
      }
    }
  }

  StackLoader stacks(trace_);
  auto load_stack = [&stacks](int64_t id) -> const Stack& { return stacks.load(id); };
  std::optional<LeakSuppressor> suppressor;
  if (options_.suppressions) suppressor.emplace(*options_.suppressions, load_stack, source_key);
  XlaArenaAtExit xla_arena;  // JAX/XLA's arena is cached at exit, not leaked (allocators.h)
  group_leaks(stacks, suppressor, xla_arena, start);

  for (AllocFailure& failure : report_.failures) {
    failure.time_ns = relative(failure.time_ns, start);
    failure.stack = stacks.load(failure.stack.id);
  }
  over_time_.finish(trace_, report_, start, options_, load_stack, source_key);
  report_.pools = pools_.finish(trace_, start);
  if (heaps_ && set_ == EventSet::AppLevel) {
    report_.heap_fragmentation =
        heap_fragmentation_.finish(heaps_->layout, report_.trace.duration_ns, load_stack, source_key);
  }
  report_.imported = imported_.finish(start, load_stack, source_key);
  ranges_.finish(report_, start, options_, load_stack, source_key);
  if (suppressor) report_.suppressed = suppressor->results();
  report_.breakdown = breakdown_.finish(live_, load_stack, [&suppressor, &xla_arena](int64_t stack_id) {
    return (suppressor && suppressor->is_suppressed(stack_id)) || xla_arena.is_arena(stack_id);
  });
  return std::move(report_);
}

// Stacks whose frames resolve to the same functions and source lines are one group even when their raw pcs differ
// (an unrolled or duplicated call site). Unsymbolized frames compare by pc. std::map keeps the grouping
// deterministic.
void EventPass::group_leaks(StackLoader& stacks, std::optional<LeakSuppressor>& suppressor, XlaArenaAtExit& xla_arena,
                            int64_t start) {
  std::map<std::string, LeakGroup> groups;
  // The last `gpumemtrace ctl` pause begun before the analysis ends: an allocation alive then and never seen freed
  // may have been freed while paused (TraceInfo::control_pause_starts_ns): counted apart, not judged.
  std::optional<int64_t> last_pause;
  const int64_t analysis_end =
      options_.filters.until_ns ? origin_.value_or(start) + *options_.filters.until_ns : INT64_MAX;
  for (int64_t pause : report_.trace.control_pause_starts_ns) {
    if (pause <= analysis_end) last_pause = pause;
  }
  for (const auto& [address, allocation] : live_) {
    if (suppressor && suppressor->suppress(allocation.stack_id, allocation.size)) continue;
    if (last_pause && allocation.time_ns < *last_pause) {
      ++report_.trace.unjudged_after_pause_allocations;
      report_.trace.unjudged_after_pause_bytes += allocation.size;
      continue;
    }
    const Stack& stack = stacks.load(allocation.stack_id);
    if (xla_arena.take(allocation.stack_id, stack, allocation.size)) continue;
    // Worker threads' blocks of backward(): one group per caller's line beside the worker's stack. Only where the
    // allocating thread names no user line of its own: autograd's worker threads have no Python frames, while
    // another thread of the app that allocates during the call (a data loader) names its own line and is not
    // backward()'s.
    int64_t backward = allocation.backward_stack_id;
    if (backward != 0 && user_frame(stack) != nullptr) backward = 0;
    std::string key = source_key(stack);
    if (backward > 0) {
      key += "\x1d" + source_key(stacks.load(backward));
    } else if (backward == kBackwardCallerUnknown) {
      key += "\x1d?";
    }
    LeakGroup& group = groups[key];
    if (group.count == 0) group.backward_stack_id = backward;
    const int64_t when = relative(allocation.time_ns, start);
    if (group.count == 0 || when < group.first_alloc_ns) group.first_alloc_ns = when;
    if (group.count == 0 || when > group.last_alloc_ns) group.last_alloc_ns = when;
    if (group.count == 0 || allocation.stack_id < group.stack.id) group.stack.id = allocation.stack_id;
    insert_sorted_unique(group.stack_ids, allocation.stack_id);
    group.bytes += allocation.size;
    ++group.count;
    insert_sorted_unique(group.memory_kinds, allocation.memory_kind);
    insert_sorted_unique(group.apis, allocation.api);
    insert_sorted_unique(group.devices, allocation.device);
    totals_.leaked_bytes += allocation.size;
    ++totals_.leaked_allocations;
    if (uint64_t* leaked = report_.leaked_by_kind.find(allocation.memory_kind)) *leaked += allocation.size;
  }

  xla_arena.add_to(report_);
  report_.leak_groups_total = groups.size();
  report_.min_bytes = options_.min_bytes;
  for (auto& [key, group] : groups) {
    if (options_.min_bytes && group.bytes < *options_.min_bytes) {
      ++report_.leak_groups_below_min_bytes;
      report_.leaked_bytes_below_min_bytes += group.bytes;
      continue;
    }
    report_.leaks.push_back(std::move(group));
  }
  std::sort(report_.leaks.begin(), report_.leaks.end(), [](const LeakGroup& a, const LeakGroup& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    if (a.count != b.count) return a.count > b.count;
    return a.stack.id < b.stack.id;
  });
  for (LeakGroup& group : report_.leaks) {
    group.stack = stacks.load(group.stack.id);
    if (group.backward_stack_id > 0) group.backward_stack = stacks.load(group.backward_stack_id);
  }
}

}  // namespace

Report run_event_pass(const TraceFile& trace, const AnalyzeOptions& options, EventOrder order, size_t window,
                      EventSet set, HeapPass* heaps) {
  EventPass pass(trace, options, set, heaps);
  // Time order is what matters for live bytes; id breaks ties in recording order (see the schema): EventReader
  // hands the rows out ordered by (time_ns, id).
  EventReader events(trace, set, order, window);
  while (events.step()) pass.on_event(events.row());
  return pass.finish();
}

}  // namespace gmt::analysis
