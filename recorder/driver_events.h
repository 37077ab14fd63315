// Turning one driver-API call into events: shared by both driver-level backends (cupti/ and
// interpose/driver_hooks.cpp), so that they record the same thing for the same call. Call these only when
// the caller's backend is the active one, inside an active HookScope, after the call returned (for frees
// of a plain allocation: before the real free, as the runtime hooks do).
#pragma once

#include <cstdint>
#include <optional>

#include "recorder/event.h"

namespace gmt::recorder {

struct DriverCall {
  schema::Api driver_api = schema::Api::Unknown;  // e.g. cuMemAlloc; replaced by the runtime call in progress
  schema::Source source = schema::Source::Cupti;
  int32_t result = 0;  // CUresult
  int16_t device = -1;
  uint64_t context = 0;
  uint64_t stream = 0;
};

// An event of `kind` for `call`, stamped now, named after the runtime call in progress when there is one.
EventRecord make_driver_event(const DriverCall& call, schema::EventKind kind, schema::MemoryKind memory_kind);

struct DeviceMemoryInfo {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};

// An allocation (result 0) or a failed one (result != 0; `memory` = cuMemGetInfo right after an
// out-of-memory error, when the caller could ask). `pool` is the pool of cuMemAllocFromPoolAsync.
void record_driver_alloc(const DriverCall& call, schema::MemoryKind kind, uint64_t address, uint64_t size,
                         uint64_t pool = 0, std::optional<DeviceMemoryInfo> memory = std::nullopt);

void record_driver_free(const DriverCall& call, schema::MemoryKind kind, uint64_t address);

// Another process's memory opened here (cuIpcOpenMemHandle, after it succeeded): an Alloc of memory kind
// IpcImported, with the opened range's size and the device the memory lives on (driver_queries.h) in place
// of the call's device. Failed opens are not recorded: they hold nothing, and are no allocation failure.
void record_ipc_open(const DriverCall& call, uint64_t address);
// cuIpcCloseMemHandle, before the real close runs: a Free of memory kind IpcImported on the memory's device.
void record_ipc_close(const DriverCall& call, uint64_t address);
// cuMemImportFromShareableHandle: VmmImport of memory kind IpcImported, on the device the physical memory
// lives on.
void record_vmm_import(const DriverCall& call, uint64_t handle);

// Pool and VMM events (EventKind::PoolCreate ... VmmUnmap); only successful calls are recorded.
void record_driver_event(const DriverCall& call, schema::EventKind kind, uint64_t address, uint64_t size,
                         uint64_t handle, bool take_stack = true);

}  // namespace gmt::recorder
