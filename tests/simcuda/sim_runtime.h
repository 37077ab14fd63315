// Shared state of the simulated CUDA runtime: devices with their heaps, streams, events, memory
// pools, pinned host ranges and registered kernels/symbols. The api_*.cpp files hold the exported
// CUDA entry points; they are thin and call into this state.
//
// Every source of the library includes the toolkit's cuda_runtime_api.h with
// __CUDA_API_VERSION_INTERNAL defined (set by CMake), which is how the real library is built: the
// header then declares both the plain and the _ptsz/_ptds entry points, so the compiler checks each
// of our definitions against the toolkit's own declaration.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sim_heap.h"

namespace gmt::sim {

// Default capacity of each simulated device when GMT_SIM_DEVICE_BYTES is unset.
inline constexpr std::size_t kDefaultDeviceBytes = std::size_t{16} << 30;

// What a heap allocation is; stored in the low byte of Heap::Allocation::tag. The upper 24 bits
// hold the id of the memory pool a stream-ordered allocation came from (0: none), so cudaFree of
// such a pointer can settle the pool's accounting without a second lookup table.
enum class MemoryKind : std::uint32_t { Device = 1, Managed = 2 };
inline std::uint32_t make_tag(MemoryKind kind, std::uint32_t pool_id = 0) {
  return static_cast<std::uint32_t>(kind) | (pool_id << 8);
}
inline MemoryKind tag_kind(std::uint32_t tag) { return static_cast<MemoryKind>(tag & 0xff); }
inline std::uint32_t tag_pool(std::uint32_t tag) { return tag >> 8; }

struct Device {
  int ordinal = 0;
  std::mutex mutex;       // guards everything below
  void* arena = nullptr;  // the reserved mapping that backs the heap
  std::size_t arena_bytes = 0;
  Heap heap;
  unsigned flags = 0;                 // cudaSetDeviceFlags; recorded, otherwise meaningless here
  std::map<int, std::size_t> limits;  // cudaDeviceSetLimit values, by cudaLimit
};

struct Stream {
  int device = 0;
  unsigned flags = 0;
  int priority = 0;
  unsigned long long id = 0;
};

struct Event {
  int device = 0;
  unsigned flags = 0;
  bool recorded = false;
  std::chrono::steady_clock::time_point when{};
};

// A stream-ordered memory pool. Pool objects are never deleted, only dropped from
// Runtime::live_pools when destroyed: tags of allocations still outstanding may name them.
struct Pool {
  std::uint32_t id = 0;  // index + 1 into Runtime::pools_, also stored in allocation tags
  int device = 0;
  bool is_default = false;
  std::atomic<std::uint64_t> used{0};
  std::atomic<std::uint64_t> used_high{0};
  // The pool's reservation, as a real pool keeps one: it grows in kPoolReserveGranularity steps when used outgrows
  // it, keeps freed memory, and gives back what exceeds release_threshold at each synchronization (and at
  // cudaMemPoolTrimTo). Bookkeeping only: the blocks themselves come from the device's heap as before.
  std::atomic<std::uint64_t> reserved{0};
  std::atomic<std::uint64_t> reserved_high{0};
  std::atomic<std::uint64_t> release_threshold{0};
};

inline constexpr std::uint64_t kPoolReserveGranularity = 2 << 20;

// Page-locked host memory as the runtime knows it: from cudaMallocHost/cudaHostAlloc, or a range
// the program handed to cudaHostRegister.
struct HostRange {
  std::size_t bytes = 0;
  unsigned flags = 0;
  int device = 0;  // current device at allocation time, reported by cudaPointerGetAttributes
  bool registered = false;
};

// Another process's device memory opened here (cudaIpcOpenMemHandle): a fresh address range of this
// process, standing for memory that lives on `device` of the exporting process.
struct Import {
  int device = 0;
  std::size_t bytes = 0;         // the exported allocation's size
  std::size_t mapped_bytes = 0;  // the mapping's length (whole pages)
};

struct Kernel {
  const char* name = nullptr;  // mangled device name, owned by the program's registration data
  void** module = nullptr;
};

// A __device__/__constant__ variable. The program's host shadow copy doubles as its "device"
// storage, so cudaMemcpyToSymbol & co. can work without any device.
struct Symbol {
  char* storage = nullptr;
  std::size_t bytes = 0;
  const char* name = nullptr;
  void** module = nullptr;
};

// How a pointer relates to the memory the runtime manages; see Runtime::classify.
enum class Where {
  DeviceAllocation,  // inside a live device or managed allocation, range fits
  BadDeviceRange,    // inside a device arena but not within one live allocation (freed, overrun)
  Symbol,            // inside a registered __device__ variable
  PinnedHost,        // inside cudaMallocHost/cudaHostAlloc/cudaHostRegister memory
  PageableHost,      // anything else
};

struct Classified {
  Where where = Where::PageableHost;
  int device = -1;
  MemoryKind kind = MemoryKind::Device;
};

class Runtime {
 public:
  // The process-wide runtime, created on first use: reads GMT_SIM_DEVICE_COUNT and
  // GMT_SIM_DEVICE_BYTES, reserves the device arenas and prints the banner. Never destroyed, so
  // CUDA calls from static destructors and atexit handlers keep working.
  static Runtime& get();

  int device_count() const { return static_cast<int>(devices_.size()); }
  Device* device(int ordinal);
  // cudaSuccess, or the error a call naming this device (or the current one) must return.
  cudaError_t check_device(int ordinal) const;

  // --- device memory ---------------------------------------------------------------------------
  cudaError_t allocate(int device, std::size_t bytes, std::uint32_t tag, void** out);
  // Frees a device/managed allocation of any device; cudaErrorInvalidValue if `p` is not the start
  // of one. Settles memory-pool accounting for stream-ordered allocations.
  cudaError_t free(void* p);
  // Frees everything the device owns and re-creates its heap; re-reads GMT_SIM_DEVICE_BYTES so a
  // test can change the capacity between runs (device count stays fixed for the process).
  void reset_device(int ordinal);
  Classified classify(const void* p, std::size_t bytes);

  // --- objects (all guarded by objects_mutex) ---------------------------------------------------
  // Resolves a stream handle to its device; 0, cudaStreamLegacy and cudaStreamPerThread mean the
  // calling thread's current device.
  cudaError_t stream_device(cudaStream_t stream, int* device);

  Pool* new_pool(int device, bool is_default);  // caller holds objects_mutex
  Pool* pool_by_id(std::uint32_t id);           // caller holds objects_mutex
  // A synchronization: every pool gives back its reservation above its release threshold (Pool::reserved).
  void release_pool_reservations();
  // cudaMemPoolTrimTo: `pool` keeps at most max(its used bytes, keep) reserved.
  static void trim_pool(Pool& pool, std::uint64_t keep);
  Pool* default_pool(int device) { return default_pools_.at(device); }

  std::mutex objects_mutex;
  std::unordered_set<Stream*> streams;
  std::unordered_set<Event*> events;
  std::unordered_set<Pool*> live_pools;
  std::vector<Pool*> current_pools;                 // per device, what cudaMallocAsync uses
  std::map<std::uintptr_t, HostRange> host_ranges;  // keyed by start address
  std::map<std::uintptr_t, Import> imports;         // open IPC imports, keyed by start address
  std::unordered_map<const void*, Kernel> kernels;  // keyed by host stub address
  std::map<std::uintptr_t, Symbol> symbols;         // keyed by host shadow address
  // Storage of __managed__ variables: kept for the life of the process (atexit handlers may read a
  // variable after its module is unregistered), and listed here so it stays reachable.
  std::vector<void*> managed_variables;
  std::atomic<unsigned long long> next_stream_id{1};

 private:
  Runtime();
  void map_arena(Device& device, std::size_t bytes);

  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<std::unique_ptr<Pool>> pools_;  // index = id - 1; grows only
  std::vector<Pool*> default_pools_;
};

// The properties cudaGetDeviceProperties reports for a valid ordinal (api_device.cpp).
cudaDeviceProp device_properties(int ordinal);

// Per-thread state, as in the real runtime.
int& current_device();
cudaError_t& last_error();

// Records a failure as the thread's last error (as every real runtime call does) and passes the
// code through, so entry points can end with `return finish(...)`.
inline cudaError_t finish(cudaError_t result) {
  if (result != cudaSuccess) last_error() = result;
  return result;
}

// Prints the one-time banner unless GMT_SIM_QUIET=1. Runtime::get() calls it; entry points that
// need no runtime state (cudaGetErrorString, ...) call it directly.
void announce();

// Parses a byte count: plain bytes, or with a K/M/G/T suffix (powers of 1024). nullopt if invalid.
std::optional<std::size_t> parse_bytes(const char* text);

// Memory-pool accounting after an allocation from `pool` (which may be null).
void pool_account_alloc(Pool* pool, std::size_t bytes);

}  // namespace gmt::sim

// Exports `twin` as a second name for the entry point `target` defined in the same file. The real
// library exports _ptsz ("per-thread stream") and _ptds ("per-thread default stream") twins, which
// programs built with --default-stream per-thread call instead. With no queues, the per-thread
// default stream behaves exactly like the legacy one, so a twin is the same code: an alias rather
// than a wrapper, so the twin never calls back through an interposable symbol. The parameter list
// is spelled out (decltype would drag the header's default arguments along, which GCC rejects);
// the toolkit's own declaration of the twin and the static_assert keep it honest.
#define GMT_SIM_TWIN(twin, target, params)                            \
  extern "C" cudaError_t twin params __attribute__((alias(#target))); \
  static_assert(std::is_same_v<decltype(&twin), decltype(&target)>, #twin " differs from " #target)
