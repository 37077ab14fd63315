// The trace schema: the one contract between the code that writes traces (recorder/, inside the profiled
// process) and the code that reads them (analysis/, cli/). Nothing else defines table layouts or codes.
//
// Rules (docs/trace-format.md explains each table):
// - kSchemaVersion goes in PRAGMA user_version; bump it for every change to the tables below, and teach the
//   reader to accept every older version it can. Readers refuse newer versions, naming both numbers.
// - kApplicationId goes in PRAGMA application_id, so a reader can tell our traces from other SQLite files.
// - The enum values below are stored in the trace: never renumber, only append.
#pragma once

#include <cstdint>
#include <string_view>

#include "schema/trace_meta.h"  // the meta table's keys and values

namespace gmt::schema {

// Version history: 1 = runtime hooks only; 2 = events.handle and events.context, driver-API, pool and
// VMM events, CUPTI and driver-hook sources; 3 = the pool_usage table; 4 = the application's NVTX ranges and
// markers (tables strings, ranges, marks); 5 = Python frames in stacks (table python_frames, column
// stack_frames.python_frame_id); 6 = memory imported from other processes (IPC and
// shareable VMM handles), a framework allocator's own statistics (table allocator_stats), PyTorch's tensor blocks
// (the block-level mode) and the devices table. Readers of v6 read every older trace: a trace without a table
// simply has none of its rows (no ranges, no Python frames, no allocator statistics, no device names). 7 = a
// `run --verify` trace holds the events of two driver-level backends, each under its own source; the one named
// by meta verify_backend is the cross-check's and is never counted (readers of v6 would count both); a framework
// allocator's segments (event kinds SegmentAlloc, SegmentFree) and its blocks recorded as they happen, from
// PyTorch's trace tracker (events of source TorchAllocator are in time order with all others); CUDA graphs' memory
// nodes (GraphAllocNode, and Alloc/Free of api graphMemAlloc/graphMemFree at launches). No table changes. 8 = heaps
// and regions described with the NVTX memory API (source NvtxMemory, memory kind HeapBlock, apis nvtxMem*), and
// the app's exit status in meta. No table changes. 9 = autograd's backward calls (event kinds AutogradBegin,
// AutogradEnd on the calling thread, with its stack: tensors that autograd's worker threads allocate meanwhile are
// linked to the caller's line), CuPy's memory pool as a heap (source CupyAllocator: its chunks as SegmentAlloc /
// SegmentFree, its blocks as Alloc / Free of memory kind HeapBlock), and stream-ordered pools sampled by the writer
// at each new used peak and at exit (more pool_usage rows). No table changes.
// 10 (what-if replay, issue 37) = what a replay of PyTorch's caching allocator needs: FreeRequested events (a tensor
// let go of a block that returns to the cache only at its later Free, after other streams finished with it), the
// allocator's settings and calls (AllocatorCall events: empty_cache, _set_allocator_settings, memory fraction; meta
// torch_alloc_conf, torch_version), and the device's free memory in a PyTorch OOM's address. No table changes.
// 11 = aggregate traces (`run --aggregate`, schema/aggregate_schema.h): meta trace_mode = "aggregate", the aggregate_*
// tables, and an `events` table that keeps a subsequence of the full trace's rows under their full-trace ids; a full
// v11 trace is a v10 one. The reader accepts every version up to this one (analysis/read/trace_file.cpp); an
// aggregate trace is told by its meta (analysis/read/aggregate.cpp), not by it.
// 12 (issue 35, part 3: fewer bytes per event) = what an event is and where (kind, api, source, memory kind,
// device, context: a few dozen combinations in a run) is interned in table event_types, and an event's row (table
// event_rows: time, type, thread, stream, address, size, stack, error, handle) names its type. Stream and error stay
// in the row so that it has ten columns: ranges has eight integers under an INTEGER PRIMARY KEY, event_types seven,
// and no table ten, so a damaged trace's orphan pages are still told apart by their rows' shape
// (analysis/read/salvage.cpp). A damaged event_types would change every event's meaning unnoticed: the reader
// checks it against its UNIQUE index (analysis/read/trace_file.cpp). `events` is a view with
// the v11 columns (and INSTEAD OF triggers for INSERT, UPDATE and DELETE), so SQL written for older traces reads and
// writes a v12 trace unchanged; only an index by address moves to event_rows (docs/trace-format.md).
// 13 (issue 33: sampled stacks) = meta block_stack_sample_bytes: under `run --sample-block-stacks`, a framework's block
// allocation (memory kind TensorBlock or HeapBlock) with stack 0 was recorded without its stack by the sample, where
// in older traces stack 0 meant stacks were off. No table changes.
inline constexpr int kSchemaVersion = 13;
// "GMTR" in ASCII: lets `report` tell a gpumemtrace trace from any other SQLite database.
inline constexpr int32_t kApplicationId = 0x474D5452;

enum class EventKind : uint8_t {
  Alloc = 1,         // a successful allocation: address, size, memory kind
  Free = 2,          // a free of an address (recorded before the real free runs)
  AllocFailed = 3,   // an allocation that returned an error; size is the request
  StreamCreate = 4,  // stream = the new stream handle
  StreamDestroy = 5,
  Synchronize = 6,  // cudaStreamSynchronize (stream set) or cudaDeviceSynchronize (stream 0)
  // Stream-ordered memory pools: address = the pool handle.
  PoolCreate = 7,
  PoolDestroy = 8,
  PoolTrim = 9,  // size = the minimum bytes to keep
  // Virtual memory management (cuMem* VMM). Physical memory is a handle: it is live from VmmCreate until
  // VmmRelease *and* the last VmmUnmap of it (the driver frees it only then).
  VmmReserve = 10,      // address, size: a virtual address range reserved
  VmmAddressFree = 11,  // address, size: the range given back
  VmmCreate = 12,       // handle, size: physical memory created
  VmmRelease = 13,      // handle
  VmmMap = 14,          // address, size, handle: physical memory mapped into a reserved range
  VmmUnmap = 15,        // address, size
  // A sample of a stream-ordered pool's reserved and used bytes. Stored in the pool_usage table, not in
  // events (in the recorder: recorder/event.h, PoolUsagePayload).
  PoolUsage = 16,
  // The application's NVTX annotations (nvtx/, schema v4). Stored in the ranges and marks tables, never in
  // events (in the recorder: recorder/event.h, RangePayload and MarkPayload).
  RangeBegin = 17,
  RangeEnd = 18,
  Mark = 19,
  // Physical memory imported from another process's shareable handle (cuMemImportFromShareableHandle, v6):
  // handle = the imported handle, size = 0 (the size is known when it is mapped: VmmMap of that handle). Its
  // mappings are memory kind IpcImported: the exporting process owns the physical memory.
  VmmImport = 20,
  // A sample of a framework allocator's own statistics (v6). Stored in the allocator_stats table, never in
  // events.
  AllocatorSample = 21,
  // A framework allocator's reservation (v7; source TorchAllocator, memory kind TensorBlock): address, size of a
  // range of device memory it took from CUDA to hand out as blocks (PyTorch: a segment it cudaMalloc'd, or the
  // part of an expandable segment it mapped), and the same range given back. The CUDA-level events of that memory
  // stay the one count of device memory: these only say which device memory is a framework's heap, and where its
  // blocks lie.
  SegmentAlloc = 22,
  SegmentFree = 23,
  // A memory-alloc node added to a CUDA graph (v7): an allocation made on a capturing stream, or
  // cuGraphAddMemAllocNode. address, size: the node's; the stack: where it was made. Not memory: each launch of an
  // instantiated graph allocates it (Alloc, api graphMemAlloc, with this stack) and its free nodes free (Free, api
  // graphMemFree), at launch time (recorder/graph_memory.h).
  GraphAllocNode = 24,
  // A call of autograd's backward on the calling thread (v9; source TorchAllocator; api torchBackward or
  // torchAutogradGrad): begun with the caller's stack (its Python frames name the backward() line), and ended.
  // handle: the call's number, the same in both. Not memory: what autograd's worker threads allocate between the two
  // is linked to that line (docs/analysis.md "Tensors of backward()").
  AutogradBegin = 25,
  AutogradEnd = 26,
  // v10: PyTorch's FREE_REQUESTED of a block whose return to the cache waits for other streams (record_stream): the
  // tensor let go here; the block's Free (FREE_COMPLETED) comes later. address: the block's; size: its requested
  // bytes. A block freed at once has no FreeRequested, only its Free. Not memory: the Free is the free.
  FreeRequested = 27,
  // v10: a call that changes PyTorch's caching allocator (source TorchAllocator, memory kind None), by api:
  // torchEmptyCache (device -1: every device), torchSetAllocatorSettings (handle n: the text is meta
  // torch_alloc_conf_<n>), torchSetMemoryFraction (device; size: the fraction, the bits of its IEEE double). Recorded
  // before the call runs, so the segments it frees follow it.
  AllocatorCall = 28,
};

enum class MemoryKind : uint8_t {
  None = 0,  // events that are not about memory (streams, syncs)
  Device = 1,
  Managed = 2,
  HostPinned = 3,
  VmmPhysical = 4,  // physical memory created with cuMemCreate (counted once, however often it is mapped)
  // Another process's device memory opened here (cudaIpcOpenMemHandle / cuIpcOpenMemHandle, or a mapping of a
  // VMM handle imported with cuMemImportFromShareableHandle) (v6). The exporter owns the memory: it is never
  // added to this process's device total. events.device: for an IPC-opened pointer the device the driver names
  // for it (the opening context's); for a mapped VMM import the device the physical memory lives on.
  IpcImported = 5,
  // A block PyTorch's caching allocator handed to a tensor (the block-level mode, v6; source TorchAllocator).
  // It lives inside device memory already counted as Device or VmmPhysical: never added to device totals.
  TensorBlock = 6,
  // A region that an allocator described with the NVTX memory API (nvtxMemRegionsRegister) inside one of its heaps
  // (v8; source NvtxMemory). Like TensorBlock, it lives inside device memory already counted at the CUDA level.
  HeapBlock = 7,
};

// Which hooked function produced an event. Driver-API and CUPTI ids are appended by later versions.
enum class Api : uint8_t {
  Unknown = 0,
  cudaMalloc = 1,
  cudaMallocManaged = 2,
  cudaMallocHost = 3,
  cudaHostAlloc = 4,
  cudaMallocPitch = 5,
  cudaMalloc3D = 6,
  cudaMallocAsync = 7,
  cudaMallocFromPoolAsync = 8,
  cudaFree = 9,
  cudaFreeHost = 10,
  cudaFreeAsync = 11,
  cudaStreamCreate = 12,
  cudaStreamCreateWithFlags = 13,
  cudaStreamCreateWithPriority = 14,
  cudaStreamDestroy = 15,
  cudaStreamSynchronize = 16,
  cudaDeviceSynchronize = 17,
  // Driver API (seen through CUPTI's driver callbacks or the driver entry-point hooks).
  cuMemAlloc = 18,  // cuMemAlloc_v2
  cuMemAllocPitch = 19,
  cuMemAllocManaged = 20,
  cuMemAllocHost = 21,
  cuMemHostAlloc = 22,
  cuMemFree = 23,
  cuMemFreeHost = 24,
  cuMemAllocAsync = 25,
  cuMemAllocFromPoolAsync = 26,
  cuMemFreeAsync = 27,
  cuMemPoolCreate = 28,
  cuMemPoolDestroy = 29,
  cuMemPoolTrimTo = 30,
  cuMemCreate = 31,
  cuMemRelease = 32,
  cuMemMap = 33,
  cuMemUnmap = 34,
  cuMemAddressReserve = 35,
  cuMemAddressFree = 36,
  cudaMemPoolCreate = 37,
  cudaMemPoolDestroy = 38,
  cudaMemPoolTrimTo = 39,
  // v6: memory imported from other processes.
  cudaIpcOpenMemHandle = 40,
  cudaIpcCloseMemHandle = 41,
  // cuIpcOpenMemHandle and cuIpcOpenMemHandle_v2. Spelled _v2 because cuda.h #defines cuIpcOpenMemHandle as
  // cuIpcOpenMemHandle_v2: the name then means the same enumerator with or without cuda.h included.
  cuIpcOpenMemHandle_v2 = 42,
  cuIpcCloseMemHandle = 43,
  cuMemImportFromShareableHandle = 44,
  // v6: a tensor block allocated or freed by PyTorch's caching allocator (block-level mode).
  torchBlockAlloc = 45,
  torchBlockFree = 46,
  // v7: PyTorch's caching allocator's segments (SegmentAlloc / SegmentFree events).
  torchSegmentAlloc = 47,
  torchSegmentFree = 48,
  torchSegmentMap = 49,    // expandable segments: a part mapped
  torchSegmentUnmap = 50,  // ... unmapped
  // v7: CUDA graphs. A launch's allocation by a memory-alloc node, and its free by a memory-free node; a
  // stream-ordered allocation made while its stream captures is recorded under its own name, as GraphAllocNode.
  graphMemAlloc = 51,
  graphMemFree = 52,
  cuGraphAddMemAllocNode = 53,  // a GraphAllocNode added to a graph by hand (not by stream capture)
  // v8: an allocator's heaps and regions described with the NVTX memory API (nvtx3/nvToolsExtMem.h).
  nvtxMemHeapRegister = 54,     // SegmentAlloc: a heap's range
  nvtxMemHeapUnregister = 55,   // SegmentFree: the heap, and Free of every region still in it
  nvtxMemRegionsRegister = 56,  // Alloc (memory kind HeapBlock): a region handed out inside a heap
  nvtxMemRegionsUnregister = 57,
  nvtxMemHeapReset = 58,  // Free of every region of a heap, which stays registered
  // v9: autograd's backward calls (AutogradBegin / AutogradEnd).
  torchBackward = 59,      // torch.autograd.backward, Tensor.backward
  torchAutogradGrad = 60,  // torch.autograd.grad
  // v9: CuPy's memory pool (source CupyAllocator): a chunk it took from CUDA, given back; a block (an array's
  // memory) handed out inside a chunk, given back.
  cupyChunkAlloc = 61,
  cupyChunkFree = 62,
  cupyBlockAlloc = 63,
  cupyBlockFree = 64,
  // v10: PyTorch's caching allocator, for its replay (EventKind FreeRequested, AllocatorCall).
  torchBlockFreeRequested = 65,
  torchEmptyCache = 66,
  torchSetAllocatorSettings = 67,
  torchSetMemoryFraction = 68,
};

// Which capture path saw the event (the CUPTI issue adds more; one place decides which path counts).
enum class Source : uint8_t {
  RuntimeHook = 1,  // interpose/: the preloaded cudart symbol (backend "runtime")
  Cupti = 2,        // cupti/: a CUPTI driver-API callback (backend "cupti")
  DriverHook = 3,   // interpose/: a hooked driver entry point (backend "hooks")
  // PyTorch's caching allocator: its blocks and segments (v6: drained from its memory history; v7: from its trace
  // tracker, as they happen). Its events never decide which capture path counts for CUDA-level memory.
  TorchAllocator = 4,
  // An allocator that describes its heaps and regions with the NVTX memory API (v8; nvtx/): same model as
  // TorchAllocator, heaps as SegmentAlloc/SegmentFree, regions as Alloc/Free of memory kind HeapBlock.
  NvtxMemory = 5,
  // CuPy's memory pool (v9; python/gpumemtrace_inprocess/cupy_tracker.py): same model as TorchAllocator, its chunks
  // as SegmentAlloc/SegmentFree, its blocks as Alloc/Free of memory kind HeapBlock.
  CupyAllocator = 6,
};

// pool_usage.pool of a sample of a device's CUDA graph memory pool (v7; cuDeviceGetGraphMemAttribute), which has no
// handle of its own: the row's device says which.
inline constexpr uint64_t kGraphMemoryPool = ~uint64_t{0};

// Which framework allocator an allocator_stats row describes (v6).
enum class FrameworkAllocator : uint8_t {
  TorchCaching = 1,      // PyTorch's caching allocator, default settings (cudaMalloc'd segments)
  TorchExpandable = 2,   // PyTorch's caching allocator with expandable_segments:True (VMM segments)
  TorchMallocAsync = 3,  // PyTorch with backend:cudaMallocAsync
  CupyPool = 4,          // CuPy's default memory pool
  JaxXla = 5,            // JAX/XLA's allocator (BFC or platform), per device
};

// Why an allocator_stats row was taken (v6).
enum class SampleTrigger : uint8_t {
  Cadence = 1,   // the fixed sampling period
  RangeEnd = 2,  // an NVTX range at nesting depth 0 ended
  Oom = 3,       // the framework reported an out-of-memory error (request_bytes is set)
  Exit = 4,      // the interpreter was shutting down
};

std::string_view to_string(EventKind kind);
std::string_view to_string(MemoryKind kind);
std::string_view to_string(Api api);
std::string_view to_string(Source source);
std::string_view to_string(FrameworkAllocator allocator);
std::string_view to_string(SampleTrigger trigger);

// The highest value of each enum, so that the lookup tables can be filled by a loop.
inline constexpr int kMaxEventKind = 28;
inline constexpr int kMaxMemoryKind = 7;
inline constexpr int kMaxApi = 68;
inline constexpr int kMaxSource = 6;
inline constexpr int kMaxFrameworkAllocator = 5;
inline constexpr int kMaxSampleTrigger = 4;

// Creates every table of a new trace. Run once, in one transaction, by the writer that creates the file.
// No index beyond the tables' keys: the profiled process never pays for one, and the analyzer reads events in order
// (kCreateAnalysisIndexesSql below is no longer created after the run: docs/trace-format.md gives it for queries by
// address).
inline constexpr const char* kCreateSchemaSql = R"SQL(
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE event_kinds  (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE memory_kinds (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE apis         (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE sources      (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE event_types (    -- what an event is and where (v12): the columns events share, interned
  id          INTEGER PRIMARY KEY,
  kind        INTEGER NOT NULL,     -- event_kinds.id
  api         INTEGER NOT NULL,     -- apis.id
  source      INTEGER NOT NULL,     -- sources.id
  memory_kind INTEGER NOT NULL,     -- memory_kinds.id
  device      INTEGER NOT NULL,     -- CUDA device ordinal, -1 for host memory and unknown
  context     INTEGER NOT NULL,     -- CUcontext as an integer, 0 when unknown
  UNIQUE (kind, api, source, memory_kind, device, context)
);
CREATE TABLE event_rows (     -- one row per event (v12; `events` below is the view to read)
  id          INTEGER PRIMARY KEY,  -- order of recording; ties in time_ns are broken by id
  time_ns     INTEGER NOT NULL,     -- CLOCK_MONOTONIC; meta.start_monotonic_ns is the process start
  type        INTEGER NOT NULL,     -- event_types.id
  thread_id   INTEGER NOT NULL,     -- kernel thread id (gettid)
  stream      INTEGER NOT NULL,     -- cudaStream_t as an integer, 0 for the legacy default stream
  address     INTEGER NOT NULL,
  size        INTEGER NOT NULL,     -- bytes granted (Alloc) or requested (AllocFailed); 0 for Free
  stack_id    INTEGER NOT NULL,     -- stacks.id, 0 when no stack was taken
  error       INTEGER NOT NULL,     -- cudaError_t / CUresult the call returned; 0 for success
  handle      INTEGER NOT NULL      -- VMM physical handle, or the pool of a pool allocation
);
-- The events of v1-v11 as they were, columns and order: CROSS JOIN keeps event_rows the outer loop (a scan in id
-- order, one lookup of its type by id per row).
CREATE VIEW events AS
  SELECT r.id AS id, r.time_ns AS time_ns, t.kind AS kind, t.api AS api, t.source AS source,
         t.memory_kind AS memory_kind, r.thread_id AS thread_id, t.device AS device, r.stream AS stream,
         r.address AS address, r.size AS size, r.stack_id AS stack_id, r.error AS error, r.handle AS handle,
         t.context AS context
  FROM event_rows r CROSS JOIN event_types t ON t.id = r.type;
CREATE TRIGGER events_insert INSTEAD OF INSERT ON events BEGIN
  INSERT INTO event_types(kind, api, source, memory_kind, device, context)
    SELECT NEW.kind, NEW.api, NEW.source, NEW.memory_kind, NEW.device, coalesce(NEW.context, 0)
    WHERE NOT EXISTS (SELECT 1 FROM event_types WHERE kind = NEW.kind AND api = NEW.api AND source = NEW.source
      AND memory_kind = NEW.memory_kind AND device = NEW.device AND context = coalesce(NEW.context, 0));
  INSERT INTO event_rows(id, time_ns, type, thread_id, stream, address, size, stack_id, error, handle)
    VALUES (NEW.id, NEW.time_ns, (SELECT id FROM event_types WHERE kind = NEW.kind AND api = NEW.api
      AND source = NEW.source AND memory_kind = NEW.memory_kind AND device = NEW.device
      AND context = coalesce(NEW.context, 0)),
      NEW.thread_id, NEW.stream, NEW.address, NEW.size, NEW.stack_id, NEW.error, coalesce(NEW.handle, 0));
END;
CREATE TRIGGER events_delete INSTEAD OF DELETE ON events BEGIN
  DELETE FROM event_rows WHERE id = OLD.id;
END;
-- An update of any column: the row's new type is interned as an insert's, the row rewritten in place.
CREATE TRIGGER events_update INSTEAD OF UPDATE ON events BEGIN
  INSERT INTO event_types(kind, api, source, memory_kind, device, context)
    SELECT NEW.kind, NEW.api, NEW.source, NEW.memory_kind, NEW.device, NEW.context
    WHERE NOT EXISTS (SELECT 1 FROM event_types WHERE kind = NEW.kind AND api = NEW.api AND source = NEW.source
      AND memory_kind = NEW.memory_kind AND device = NEW.device AND context = NEW.context);
  UPDATE event_rows SET id = NEW.id, time_ns = NEW.time_ns, thread_id = NEW.thread_id, stream = NEW.stream,
    address = NEW.address, size = NEW.size, stack_id = NEW.stack_id, error = NEW.error, handle = NEW.handle,
    type = (SELECT id FROM event_types WHERE kind = NEW.kind AND api = NEW.api AND source = NEW.source
      AND memory_kind = NEW.memory_kind AND device = NEW.device AND context = NEW.context)
    WHERE id = OLD.id;
END;
CREATE TABLE alloc_failures (
  event_id     INTEGER PRIMARY KEY,  -- events.id of an AllocFailed event
  device_free  INTEGER,              -- cudaMemGetInfo right after the failure; NULL when not asked
  device_total INTEGER
);
CREATE TABLE pool_usage (      -- stream-ordered pools, sampled (v3): see docs/trace-format.md for when
  time_ns        INTEGER NOT NULL,
  pool           INTEGER NOT NULL,  -- CUmemoryPool as an integer
  device         INTEGER NOT NULL,
  reserved_bytes INTEGER NOT NULL,  -- CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: memory the pool holds
  used_bytes     INTEGER NOT NULL   -- CU_MEMPOOL_ATTR_USED_MEM_CURRENT: of which handed out
);
CREATE TABLE allocator_stats (  -- a framework allocator's own statistics, sampled (v6): docs/trace-format.md
  time_ns              INTEGER NOT NULL,  -- CLOCK_MONOTONIC, like events.time_ns
  device               INTEGER NOT NULL,  -- CUDA device ordinal
  allocator            INTEGER NOT NULL,  -- FrameworkAllocator
  trigger              INTEGER NOT NULL,  -- SampleTrigger
  in_use_bytes         INTEGER NOT NULL,  -- handed out to the framework's arrays/tensors
  reserved_bytes       INTEGER NOT NULL,  -- held from CUDA by the allocator (in use + cached)
  inactive_split_bytes INTEGER,           -- free bytes inside split, partly used blocks; NULL: no such figure
  alloc_retries        INTEGER,           -- cumulative: allocations that freed the cache and retried
  ooms                 INTEGER,           -- cumulative: out-of-memory errors the allocator raised
  request_bytes        INTEGER            -- trigger Oom: the request that failed; else NULL
);
CREATE TABLE devices (          -- the CUDA devices the process's events name (v6)
  ordinal     INTEGER PRIMARY KEY,  -- as events.device
  name        TEXT,                 -- e.g. "NVIDIA H200"
  uuid        TEXT,                 -- "GPU-xxxxxxxx-...", as nvidia-smi prints it
  total_bytes INTEGER,              -- device memory capacity
  pci_bus_id  TEXT                  -- "0000:19:00.0"
);
CREATE TABLE strings (        -- interned names: NVTX domains, ranges, markers (v4); Python files, functions (v5)
  id   INTEGER PRIMARY KEY,
  text TEXT NOT NULL           -- UTF-8 (wide NVTX strings are converted)
);
CREATE TABLE ranges (         -- the application's NVTX ranges, push/pop and start/end (v4)
  id            INTEGER PRIMARY KEY,
  thread_id     INTEGER NOT NULL,  -- the thread that opened it (gettid)
  domain_id     INTEGER NOT NULL,  -- strings.id of the domain's name; 0 = the default domain
  name_id       INTEGER NOT NULL,  -- strings.id of the message; 0 = no message (or a payload-only event)
  start_ns      INTEGER NOT NULL,  -- CLOCK_MONOTONIC, like events.time_ns
  end_ns        INTEGER,           -- NULL while open, and for ranges never closed
  depth         INTEGER NOT NULL,  -- push/pop: 0-based nesting depth in its domain on its thread; -1: start/end
  end_thread_id INTEGER            -- the thread that closed it (start/end ranges may end on another thread)
);
CREATE TABLE marks (          -- the application's NVTX markers (nvtxMark*, nvtxDomainMarkEx) (v4)
  id        INTEGER PRIMARY KEY,
  time_ns   INTEGER NOT NULL,
  thread_id INTEGER NOT NULL,
  domain_id INTEGER NOT NULL,    -- as ranges.domain_id
  name_id   INTEGER NOT NULL     -- as ranges.name_id
);
CREATE TABLE stacks (
  id    INTEGER PRIMARY KEY,
  depth INTEGER NOT NULL
);
CREATE TABLE stack_frames (
  stack_id INTEGER NOT NULL,  -- stacks.id
  level    INTEGER NOT NULL,  -- 0 is the innermost frame: the caller of the hooked CUDA function
  pc       INTEGER NOT NULL,  -- return address as captured in the process: symbolize pc - 1; 0 for a Python frame
  python_frame_id INTEGER NOT NULL DEFAULT 0,  -- python_frames.id of a Python frame, else 0 (v5)
  PRIMARY KEY (stack_id, level)
) WITHOUT ROWID;
CREATE TABLE python_frames (  -- Python frames that stacks name (v5): docs/trace-format.md has the interleaving rule
  id          INTEGER PRIMARY KEY,
  file_id     INTEGER NOT NULL,  -- strings.id of the code object's co_filename (0: unknown)
  function_id INTEGER NOT NULL,  -- strings.id of its co_qualname, e.g. "Trainer.step" (0: unknown)
  line        INTEGER NOT NULL   -- the line being executed, 0 when unknown
);
CREATE TABLE modules (
  id       INTEGER PRIMARY KEY,
  path     TEXT NOT NULL,
  base     INTEGER NOT NULL,  -- load bias (dlpi_addr): file address = pc - base
  size     INTEGER NOT NULL,  -- extent of the mapped segments, from base
  build_id TEXT               -- hex GNU build-id, NULL when the module has none
);
CREATE TABLE symbols (        -- filled after the run by `gpumemtrace run` (or `gpumemtrace symbolize`)
  pc        INTEGER PRIMARY KEY,
  function  TEXT,             -- demangled; NULL when unknown
  file      TEXT,
  line      INTEGER,
  module_id INTEGER           -- modules.id, NULL when the pc is in no recorded module
);
)SQL";

inline constexpr const char* kCreateAnalysisIndexesSql = R"SQL(
CREATE INDEX IF NOT EXISTS events_by_address ON event_rows(address);  -- v12; events(address) before
)SQL";

}  // namespace gmt::schema
