#include "recorder/driver_events.h"

#include "recorder/backend.h"
#include "recorder/cache_hints.h"
#include "recorder/capture_safety.h"
#include "recorder/driver_queries.h"
#include "recorder/graph_memory.h"
#include "recorder/pool_sampler.h"
#include "recorder/recorder.h"
#include "recorder/settings.h"

namespace gmt::recorder {

GMT_HOT EventRecord make_driver_event(const DriverCall& call, schema::EventKind kind, schema::MemoryKind memory_kind) {
  EventRecord e;
  e.time_ns = now_ns();
  e.thread_id = current_thread_id();
  e.kind = kind;
  schema::Api runtime_api = current_runtime_api();
  e.api = runtime_api != schema::Api::Unknown ? runtime_api : call.driver_api;
  e.source = call.source;
  e.memory_kind = memory_kind;
  e.device = memory_kind == schema::MemoryKind::HostPinned ? -1 : call.device;
  e.call.context = call.context;
  e.call.stream = call.stream;
  e.call.error = call.result;
  return e;
}

namespace {

bool is_runtime_api(schema::Api api) {
  auto code = static_cast<int>(api);
  return (code >= static_cast<int>(schema::Api::cudaMalloc) &&
          code <= static_cast<int>(schema::Api::cudaDeviceSynchronize)) ||
         (code >= static_cast<int>(schema::Api::cudaMemPoolCreate) &&
          code <= static_cast<int>(schema::Api::cudaMemPoolTrimTo));
}

// Stream-ordered calls change a pool: sample it (pool_sampler.h). `api` may be the runtime or driver name.
bool is_stream_ordered(schema::Api api) {
  using schema::Api;
  return api == Api::cudaMallocAsync || api == Api::cudaMallocFromPoolAsync || api == Api::cudaFreeAsync ||
         api == Api::cuMemAllocAsync || api == Api::cuMemAllocFromPoolAsync || api == Api::cuMemFreeAsync;
}

}  // namespace

GMT_HOT void record_driver_alloc(const DriverCall& call, schema::MemoryKind kind, uint64_t address, uint64_t size,
                                 uint64_t pool, std::optional<DeviceMemoryInfo> memory) {
  // On a capturing stream the allocation is a node of the graph being built: its memory comes at each launch.
  const bool stream_ordered = is_stream_ordered(call.driver_api) || is_stream_ordered(current_runtime_api());
  if (call.result == 0 && stream_ordered && stream_is_capturing(call.stream)) {
    return record_graph_alloc_node(call, address, size);
  }
  EventRecord e =
      make_driver_event(call, call.result == 0 ? schema::EventKind::Alloc : schema::EventKind::AllocFailed, kind);
  // Inside a runtime call, the runtime may probe the driver and recover from a failure the app never sees
  // (seen on the H200: one failing driver allocation per run of the stream-ordered pool sample, while every
  // runtime call succeeded). Out-of-memory is always kept: it is what OOM forensics is for.
  if (call.result != 0 && call.result != kOutOfMemoryError && is_runtime_api(e.api)) return;
  e.call.size = size;
  e.call.handle = pool;
  if (call.result == 0) e.call.address = address;
  if (call.result != 0 && memory) {
    e.call.has_memory_info = true;
    e.call.device_free = memory->free_bytes;
    e.call.device_total = memory->total_bytes;
  }
  record(e, /*take_stack=*/true);
  // A cross-check's event (run --verify) is matched, never counted: the counting backend samples the pool.
  if (call.result == 0 && stream_ordered && !is_cross_check_source(call.source)) {
    sample_pool(pool, call.device, /*force=*/false, e.time_ns);  // the allocation's time: no second clock read
  }
}

GMT_HOT void record_driver_free(const DriverCall& call, schema::MemoryKind kind, uint64_t address) {
  if (address == 0) return;  // freeing null is a no-op, not a free
  // On a capturing stream the free is a node of the graph being built: it frees at each launch.
  if ((is_stream_ordered(call.driver_api) || is_stream_ordered(current_runtime_api())) &&
      stream_is_capturing(call.stream)) {
    return;
  }
  note_free_outside_graph(address);
  EventRecord e = make_driver_event(call, schema::EventKind::Free, kind);
  e.call.address = address;
  e.call.error = 0;
  record(e, settings().take_free_stacks);
  // The free is recorded before it runs; the pool's usage drops only afterwards. The next stream-ordered
  // call's sample (or the final trim) shows it: sampling here would show the state before the free.
}

void record_driver_event(const DriverCall& call, schema::EventKind kind, uint64_t address, uint64_t size,
                         uint64_t handle, bool take_stack) {
  if (call.result != 0) return;
  schema::MemoryKind memory_kind = kind == schema::EventKind::VmmCreate   ? schema::MemoryKind::VmmPhysical
                                   : kind == schema::EventKind::VmmImport ? schema::MemoryKind::IpcImported
                                                                          : schema::MemoryKind::None;
  EventRecord e = make_driver_event(call, kind, memory_kind);
  e.call.address = address;
  e.call.size = size;
  e.call.handle = handle;
  record(e, take_stack);
  if ((kind == schema::EventKind::PoolTrim || kind == schema::EventKind::PoolCreate) &&
      !is_cross_check_source(call.source)) {
    sample_pool(address, call.device, /*force=*/true);
  }
}

void record_ipc_open(const DriverCall& call, uint64_t address) {
  if (call.result != 0 || address == 0) return;
  ImportedRange range = describe_imported(address);
  DriverCall on_device = call;
  if (range.device >= 0) on_device.device = range.device;
  EventRecord e = make_driver_event(on_device, schema::EventKind::Alloc, schema::MemoryKind::IpcImported);
  e.call.address = address;
  e.call.size = range.size;
  record(e, /*take_stack=*/true);
}

void record_ipc_close(const DriverCall& call, uint64_t address) {
  if (address == 0) return;
  ImportedRange range = describe_imported(address);  // still open: the close has not run yet
  DriverCall on_device = call;
  if (range.device >= 0) on_device.device = range.device;
  record_driver_free(on_device, schema::MemoryKind::IpcImported, address);
}

void record_vmm_import(const DriverCall& call, uint64_t handle) {
  if (call.result != 0) return;
  DriverCall on_device = call;
  int16_t device = device_of_vmm_handle(handle);
  if (device >= 0) on_device.device = device;
  record_driver_event(on_device, schema::EventKind::VmmImport, 0, 0, handle);
}

}  // namespace gmt::recorder
