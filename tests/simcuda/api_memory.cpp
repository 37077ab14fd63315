// Allocation entry points: device, managed, pitched, stream-ordered (memory pools) and page-locked
// host memory, plus cudaMemGetInfo.
#include <cstdlib>
#include <iterator>
#include <limits>
#include <mutex>

#include "sim_runtime.h"

using gmt::sim::finish;
using gmt::sim::Heap;
using gmt::sim::MemoryKind;
using gmt::sim::Pool;
using gmt::sim::Runtime;

namespace {

// Host pinned memory is page-aligned, like the real driver's page-locked allocations.
constexpr std::size_t kHostAlignment = 4096;

cudaError_t allocate_on(int device, void** out, std::size_t bytes, MemoryKind kind, Pool* pool = nullptr) {
  if (out == nullptr) return cudaErrorInvalidValue;
  Runtime& rt = Runtime::get();
  if (const cudaError_t e = rt.check_device(device); e != cudaSuccess) return e;
  // cudaMalloc(&p, 0) succeeds with a null pointer on real hardware; programs rely on it.
  if (bytes == 0) {
    *out = nullptr;
    return cudaSuccess;
  }
  const cudaError_t e = rt.allocate(device, bytes, gmt::sim::make_tag(kind, pool != nullptr ? pool->id : 0), out);
  if (e == cudaSuccess && pool != nullptr) gmt::sim::pool_account_alloc(pool, *Heap::round_up(bytes));
  return e;
}

// Row pitch of pitched allocations: the allocation grain, so every row starts aligned.
std::size_t pitch_for(std::size_t width) {
  if (width == 0) return 0;
  const auto pitch = Heap::round_up(width);
  return pitch ? *pitch : std::numeric_limits<std::size_t>::max();
}

// a * b * c, or nullopt on overflow (which the caller reports as out of memory).
std::optional<std::size_t> checked_product(std::size_t a, std::size_t b, std::size_t c = 1) {
  std::size_t ab = 0;
  std::size_t abc = 0;
  if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc)) return std::nullopt;
  return abc;
}

cudaError_t allocate_from_pool(void** out, std::size_t bytes, cudaMemPool_t handle, cudaStream_t stream) {
  Runtime& rt = Runtime::get();
  int stream_device = 0;
  if (const cudaError_t e = rt.stream_device(stream, &stream_device); e != cudaSuccess) return e;
  Pool* pool = reinterpret_cast<Pool*>(handle);
  {
    std::lock_guard lock(rt.objects_mutex);
    if (handle == nullptr) pool = rt.current_pools.at(static_cast<std::size_t>(stream_device));
    if (!rt.live_pools.contains(pool)) return cudaErrorInvalidValue;
  }
  return allocate_on(pool->device, out, bytes, MemoryKind::Device, pool);
}

cudaError_t host_alloc(void** out, std::size_t bytes, unsigned flags) {
  if (out == nullptr) return cudaErrorInvalidValue;
  constexpr unsigned kKnownFlags = cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined;
  if ((flags & ~kKnownFlags) != 0) return cudaErrorInvalidValue;
  Runtime& rt = Runtime::get();
  if (bytes == 0) {
    *out = nullptr;
    return cudaSuccess;
  }
  void* memory = nullptr;
  if (posix_memalign(&memory, kHostAlignment, bytes) != 0) return cudaErrorMemoryAllocation;
  std::lock_guard lock(rt.objects_mutex);
  rt.host_ranges[reinterpret_cast<std::uintptr_t>(memory)] =
      gmt::sim::HostRange{bytes, flags, gmt::sim::current_device(), false};
  *out = memory;
  return cudaSuccess;
}

// The live pool behind a handle, or null; caller holds objects_mutex.
Pool* live_pool(Runtime& rt, cudaMemPool_t handle) {
  Pool* pool = reinterpret_cast<Pool*>(handle);
  return rt.live_pools.contains(pool) ? pool : nullptr;
}

}  // namespace

extern "C" {

cudaError_t cudaMalloc(void** devPtr, size_t size) {
  return finish(allocate_on(gmt::sim::current_device(), devPtr, size, MemoryKind::Device));
}

cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int flags) {
  if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost) return finish(cudaErrorInvalidValue);
  if (size == 0) return finish(cudaErrorInvalidValue);  // unlike cudaMalloc, as cuMemAllocManaged
  return finish(allocate_on(gmt::sim::current_device(), devPtr, size, MemoryKind::Managed));
}

cudaError_t cudaMallocPitch(void** devPtr, size_t* pitch, size_t width, size_t height) {
  if (pitch == nullptr) return finish(cudaErrorInvalidValue);
  const std::size_t row_pitch = pitch_for(width);
  const auto bytes = checked_product(row_pitch, height);
  if (!bytes) return finish(cudaErrorMemoryAllocation);
  const cudaError_t e = allocate_on(gmt::sim::current_device(), devPtr, *bytes, MemoryKind::Device);
  if (e == cudaSuccess) *pitch = row_pitch;
  return finish(e);
}

cudaError_t cudaMalloc3D(cudaPitchedPtr* pitchedDevPtr, cudaExtent extent) {
  if (pitchedDevPtr == nullptr) return finish(cudaErrorInvalidValue);
  const std::size_t row_pitch = pitch_for(extent.width);
  const auto bytes = checked_product(row_pitch, extent.height, extent.depth);
  if (!bytes) return finish(cudaErrorMemoryAllocation);
  void* memory = nullptr;
  const cudaError_t e = allocate_on(gmt::sim::current_device(), &memory, *bytes, MemoryKind::Device);
  if (e == cudaSuccess) *pitchedDevPtr = cudaPitchedPtr{memory, row_pitch, extent.width, extent.height};
  return finish(e);
}

cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t hStream) {
  return finish(allocate_from_pool(devPtr, size, nullptr, hStream));
}

cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream) {
  if (memPool == nullptr) return finish(cudaErrorInvalidValue);
  return finish(allocate_from_pool(ptr, size, memPool, stream));
}

cudaError_t cudaFree(void* devPtr) {
  Runtime& rt = Runtime::get();
  if (devPtr == nullptr) return cudaSuccess;
  return finish(rt.free(devPtr));
}

cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t hStream) {
  Runtime& rt = Runtime::get();
  int device = 0;
  if (const cudaError_t e = rt.stream_device(hStream, &device); e != cudaSuccess) return finish(e);
  if (devPtr == nullptr) return cudaSuccess;
  // The real pool keeps freed blocks for reuse until the release threshold is exceeded at a
  // synchronisation point; with nothing asynchronous here, memory goes straight back to the heap
  // (the behaviour of the default threshold of 0 after a sync).
  return finish(rt.free(devPtr));
}

cudaError_t cudaMallocHost(void** ptr, size_t size) { return finish(host_alloc(ptr, size, cudaHostAllocDefault)); }

cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
  return finish(host_alloc(pHost, size, flags));
}

cudaError_t cudaFreeHost(void* ptr) {
  Runtime& rt = Runtime::get();
  if (ptr == nullptr) return cudaSuccess;
  {
    std::lock_guard lock(rt.objects_mutex);
    const auto it = rt.host_ranges.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == rt.host_ranges.end() || it->second.registered) return finish(cudaErrorInvalidValue);
    rt.host_ranges.erase(it);
  }
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  Runtime& rt = Runtime::get();
  if (ptr == nullptr || size == 0) return finish(cudaErrorInvalidValue);
  const auto start = reinterpret_cast<std::uintptr_t>(ptr);
  std::lock_guard lock(rt.objects_mutex);
  // Refuse overlap with any known page-locked range, as the driver does.
  auto next = rt.host_ranges.lower_bound(start);
  if (next != rt.host_ranges.end() && next->first - start < size) {
    return finish(cudaErrorHostMemoryAlreadyRegistered);
  }
  if (next != rt.host_ranges.begin()) {
    const auto prev = std::prev(next);
    if (start - prev->first < prev->second.bytes) return finish(cudaErrorHostMemoryAlreadyRegistered);
  }
  rt.host_ranges[start] = gmt::sim::HostRange{size, flags, gmt::sim::current_device(), true};
  return cudaSuccess;
}

cudaError_t cudaHostUnregister(void* ptr) {
  Runtime& rt = Runtime::get();
  std::lock_guard lock(rt.objects_mutex);
  const auto it = rt.host_ranges.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == rt.host_ranges.end() || !it->second.registered) return finish(cudaErrorHostMemoryNotRegistered);
  rt.host_ranges.erase(it);
  return cudaSuccess;
}

cudaError_t cudaHostGetDevicePointer(void** pDevice, void* pHost, unsigned int flags) {
  if (pDevice == nullptr || flags != 0) return finish(cudaErrorInvalidValue);
  // Unified addressing: page-locked host memory has the same address on the device.
  if (gmt::sim::Runtime::get().classify(pHost, 0).where != gmt::sim::Where::PinnedHost) {
    return finish(cudaErrorInvalidValue);
  }
  *pDevice = pHost;
  return cudaSuccess;
}

cudaError_t cudaHostGetFlags(unsigned int* pFlags, void* pHost) {
  Runtime& rt = Runtime::get();
  if (pFlags == nullptr) return finish(cudaErrorInvalidValue);
  std::lock_guard lock(rt.objects_mutex);
  const auto it = rt.host_ranges.find(reinterpret_cast<std::uintptr_t>(pHost));
  if (it == rt.host_ranges.end()) return finish(cudaErrorInvalidValue);
  *pFlags = it->second.flags;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  Runtime& rt = Runtime::get();
  if (free == nullptr || total == nullptr) return finish(cudaErrorInvalidValue);
  const int ordinal = gmt::sim::current_device();
  if (const cudaError_t e = rt.check_device(ordinal); e != cudaSuccess) return finish(e);
  gmt::sim::Device* device = rt.device(ordinal);
  std::lock_guard lock(device->mutex);
  *free = device->heap.free_bytes();
  *total = device->heap.capacity();
  return cudaSuccess;
}

// --- memory pools ----------------------------------------------------------------------------

cudaError_t cudaMemPoolCreate(cudaMemPool_t* memPool, const cudaMemPoolProps* poolProps) {
  Runtime& rt = Runtime::get();
  if (memPool == nullptr || poolProps == nullptr) return finish(cudaErrorInvalidValue);
  if (poolProps->allocType != cudaMemAllocationTypePinned) return finish(cudaErrorInvalidValue);
  if (poolProps->location.type != cudaMemLocationTypeDevice) return finish(cudaErrorNotSupported);
  if (const cudaError_t e = rt.check_device(poolProps->location.id); e != cudaSuccess) return finish(e);
  std::lock_guard lock(rt.objects_mutex);
  Pool* pool = rt.new_pool(poolProps->location.id, false);
  if (pool == nullptr) return finish(cudaErrorMemoryAllocation);
  *memPool = reinterpret_cast<cudaMemPool_t>(pool);
  return cudaSuccess;
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool) {
  Runtime& rt = Runtime::get();
  std::lock_guard lock(rt.objects_mutex);
  Pool* pool = live_pool(rt, memPool);
  if (pool == nullptr || pool->is_default) return finish(cudaErrorInvalidValue);
  // Outstanding allocations stay valid until freed, as documented for the real pool.
  rt.live_pools.erase(pool);
  auto& current = rt.current_pools.at(static_cast<std::size_t>(pool->device));
  if (current == pool) current = rt.default_pool(pool->device);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* memPool, int device) {
  Runtime& rt = Runtime::get();
  if (memPool == nullptr) return finish(cudaErrorInvalidValue);
  if (const cudaError_t e = rt.check_device(device); e != cudaSuccess) return finish(e);
  *memPool = reinterpret_cast<cudaMemPool_t>(rt.default_pool(device));
  return cudaSuccess;
}

cudaError_t cudaDeviceGetMemPool(cudaMemPool_t* memPool, int device) {
  Runtime& rt = Runtime::get();
  if (memPool == nullptr) return finish(cudaErrorInvalidValue);
  if (const cudaError_t e = rt.check_device(device); e != cudaSuccess) return finish(e);
  std::lock_guard lock(rt.objects_mutex);
  *memPool = reinterpret_cast<cudaMemPool_t>(rt.current_pools.at(static_cast<std::size_t>(device)));
  return cudaSuccess;
}

cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t memPool) {
  Runtime& rt = Runtime::get();
  if (const cudaError_t e = rt.check_device(device); e != cudaSuccess) return finish(e);
  std::lock_guard lock(rt.objects_mutex);
  Pool* pool = live_pool(rt, memPool);
  if (pool == nullptr || pool->device != device) return finish(cudaErrorInvalidValue);
  rt.current_pools.at(static_cast<std::size_t>(device)) = pool;
  return cudaSuccess;
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep) {
  Runtime& rt = Runtime::get();
  std::lock_guard lock(rt.objects_mutex);
  Pool* pool = live_pool(rt, memPool);
  if (pool == nullptr) return finish(cudaErrorInvalidValue);
  Runtime::trim_pool(*pool, minBytesToKeep);
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, cudaMemPoolAttr attr, void* value) {
  Runtime& rt = Runtime::get();
  std::lock_guard lock(rt.objects_mutex);
  Pool* pool = live_pool(rt, memPool);
  if (pool == nullptr || value == nullptr) return finish(cudaErrorInvalidValue);
  const auto u64 = *static_cast<const std::uint64_t*>(value);
  switch (attr) {
    case cudaMemPoolAttrReleaseThreshold: pool->release_threshold = u64; return cudaSuccess;
    case cudaMemPoolAttrReservedMemHigh:  // high watermarks can only be reset to zero
      if (u64 != 0) return finish(cudaErrorInvalidValue);
      pool->reserved_high = pool->reserved.load();
      return cudaSuccess;
    case cudaMemPoolAttrUsedMemHigh:
      if (u64 != 0) return finish(cudaErrorInvalidValue);
      pool->used_high = pool->used.load();
      return cudaSuccess;
    case cudaMemPoolReuseFollowEventDependencies:
    case cudaMemPoolReuseAllowOpportunistic:
    case cudaMemPoolReuseAllowInternalDependencies: return cudaSuccess;  // no reuse policy to tune
    default: return finish(cudaErrorInvalidValue);
  }
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, cudaMemPoolAttr attr, void* value) {
  Runtime& rt = Runtime::get();
  std::lock_guard lock(rt.objects_mutex);
  Pool* pool = live_pool(rt, memPool);
  if (pool == nullptr || value == nullptr) return finish(cudaErrorInvalidValue);
  auto* u64 = static_cast<std::uint64_t*>(value);
  switch (attr) {
    case cudaMemPoolAttrReleaseThreshold: *u64 = pool->release_threshold; return cudaSuccess;
    case cudaMemPoolAttrReservedMemCurrent: *u64 = pool->reserved.load(); return cudaSuccess;
    case cudaMemPoolAttrUsedMemCurrent: *u64 = pool->used.load(); return cudaSuccess;
    case cudaMemPoolAttrReservedMemHigh: *u64 = pool->reserved_high.load(); return cudaSuccess;
    case cudaMemPoolAttrUsedMemHigh: *u64 = pool->used_high.load(); return cudaSuccess;
    case cudaMemPoolReuseFollowEventDependencies:
    case cudaMemPoolReuseAllowOpportunistic:
    case cudaMemPoolReuseAllowInternalDependencies: *static_cast<int*>(value) = 1; return cudaSuccess;
    default: return finish(cudaErrorInvalidValue);
  }
}

}  // extern "C"

// Per-thread-default-stream twins (see GMT_SIM_TWIN).
GMT_SIM_TWIN(cudaMallocAsync_ptsz, cudaMallocAsync, (void** devPtr, size_t size, cudaStream_t hStream));
GMT_SIM_TWIN(cudaFreeAsync_ptsz, cudaFreeAsync, (void* devPtr, cudaStream_t hStream));
GMT_SIM_TWIN(cudaMallocFromPoolAsync_ptsz, cudaMallocFromPoolAsync,
             (void** ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream));
