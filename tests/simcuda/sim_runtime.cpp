// Process-wide state of the simulated runtime: configuration, device arenas, pointer
// classification and the per-thread state every entry point relies on.
#include "sim_runtime.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "schema/environment.h"

namespace gmt::sim {
namespace {

thread_local int t_current_device = 0;
thread_local cudaError_t t_last_error = cudaSuccess;

// More simulated devices than any real node has; guards against a typo reserving terabytes.
constexpr long kMaxDevices = 64;

// Pool ids live in the upper 24 bits of an allocation tag (see make_tag).
constexpr std::size_t kMaxPools = (std::size_t{1} << 24) - 1;

// Frees at least this large hand their pages back to the kernel, so a long test that allocates and
// frees big buffers does not keep all of them resident. Smaller frees skip the syscall.
constexpr std::size_t kReleasePagesThreshold = std::size_t{1} << 20;

std::size_t env_device_bytes() {
  const char* text = std::getenv(gmt::schema::env::kSimDeviceBytes);
  if (text == nullptr || *text == '\0') return kDefaultDeviceBytes;
  if (const auto bytes = parse_bytes(text)) return *bytes;
  std::fprintf(stderr, "gpumemtrace: ignoring invalid %s=%s (using 16 GiB)\n", gmt::schema::env::kSimDeviceBytes, text);
  return kDefaultDeviceBytes;
}

int env_device_count() {
  const char* text = std::getenv(gmt::schema::env::kSimDeviceCount);
  if (text == nullptr || *text == '\0') return 1;
  char* end = nullptr;
  errno = 0;
  const long count = std::strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || count < 0 || count > kMaxDevices) {
    std::fprintf(stderr, "gpumemtrace: ignoring invalid %s=%s (using 1)\n", gmt::schema::env::kSimDeviceCount, text);
    return 1;
  }
  return static_cast<int>(count);
}

// Drops the whole pages inside [start, start + bytes); the range stays mapped and reads as zeros.
void release_pages(std::uintptr_t start, std::size_t bytes) {
  const std::uintptr_t page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const std::uintptr_t first = (start + page - 1) / page * page;
  const std::uintptr_t last = (start + bytes) / page * page;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace

int& current_device() { return t_current_device; }
cudaError_t& last_error() { return t_last_error; }

void announce() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* quiet = std::getenv(gmt::schema::env::kSimQuiet);
    if (quiet != nullptr && std::strcmp(quiet, "1") == 0) return;
    std::fputs("gpumemtrace: simulated CUDA runtime (no GPU): memory is simulated, kernels are not run\n", stderr);
  });
}

std::optional<std::size_t> parse_bytes(const char* text) {
  if (text == nullptr || !std::isdigit(static_cast<unsigned char>(*text))) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (errno != 0) return std::nullopt;
  unsigned shift = 0;
  switch (std::toupper(static_cast<unsigned char>(*end))) {
    case '\0': break;
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    case 'T': shift = 40; break;
    default: return std::nullopt;
  }
  if (shift != 0) {
    ++end;
    // Accept "16G", "16GB" and "16GiB" alike; all mean powers of 1024 here.
    if (*end == 'i' || *end == 'I') ++end;
    if (*end == 'b' || *end == 'B') ++end;
    if (*end != '\0') return std::nullopt;
  }
  if (value > (std::numeric_limits<std::size_t>::max() >> shift)) return std::nullopt;
  return static_cast<std::size_t>(value) << shift;
}

namespace {

std::uint64_t round_up_to_reserve(std::uint64_t bytes) {
  return (bytes + kPoolReserveGranularity - 1) / kPoolReserveGranularity * kPoolReserveGranularity;
}

void raise_to(std::atomic<std::uint64_t>& value, std::uint64_t at_least) {
  std::uint64_t seen = value.load();
  while (at_least > seen && !value.compare_exchange_weak(seen, at_least)) {
  }
}

// Lowers `pool`'s reservation to `target`, never below what its live allocations need.
void lower_reservation(Pool& pool, std::uint64_t target) {
  std::uint64_t seen = pool.reserved.load();
  for (;;) {
    const std::uint64_t floor = round_up_to_reserve(pool.used.load());
    const std::uint64_t wanted = std::max(floor, std::min(seen, target));
    if (wanted >= seen || pool.reserved.compare_exchange_weak(seen, wanted)) return;
  }
}

}  // namespace

void pool_account_alloc(Pool* pool, std::size_t bytes) {
  if (pool == nullptr) return;
  const std::uint64_t now = pool->used.fetch_add(bytes) + bytes;
  raise_to(pool->used_high, now);
  raise_to(pool->reserved, round_up_to_reserve(now));
  raise_to(pool->reserved_high, pool->reserved.load());
}

void Runtime::release_pool_reservations() {
  std::lock_guard lock(objects_mutex);
  for (Pool* pool : live_pools) {
    const std::uint64_t threshold = pool->release_threshold.load();
    if (pool->reserved.load() > threshold)
      lower_reservation(*pool, threshold / kPoolReserveGranularity * kPoolReserveGranularity);
  }
}

void Runtime::trim_pool(Pool& pool, std::uint64_t keep) { lower_reservation(pool, round_up_to_reserve(keep)); }

Runtime& Runtime::get() {
  // Deliberately leaked: programs free memory from static destructors and atexit handlers (the
  // nvcc-generated __cudaUnregisterFatBinary runs from one), after a static object would be gone.
  static Runtime* const instance = new Runtime();
  return *instance;
}

Runtime::Runtime() {
  announce();
  const int count = env_device_count();
  const std::size_t bytes = env_device_bytes();
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    auto device = std::make_unique<Device>();
    device->ordinal = ordinal;
    map_arena(*device, bytes);
    devices_.push_back(std::move(device));
  }
  std::lock_guard lock(objects_mutex);
  for (int ordinal = 0; ordinal < count; ++ordinal) default_pools_.push_back(new_pool(ordinal, true));
  current_pools = default_pools_;
}

void Runtime::map_arena(Device& device, std::size_t bytes) {
  if (device.arena != nullptr) munmap(device.arena, device.arena_bytes);
  device.arena = nullptr;
  device.arena_bytes = 0;
  device.heap = Heap();
  bytes -= bytes % Heap::kGranularity;
  if (bytes == 0) return;  // a zero-capacity device: every allocation fails, which a test may want
  // NORESERVE: the capacity is address space only; pages become real when the program touches them.
  void* arena = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (arena == MAP_FAILED) {
    std::fprintf(stderr, "gpumemtrace: cannot reserve %zu bytes for simulated device %d: %s\n", bytes, device.ordinal,
                 std::strerror(errno));
    return;
  }
  device.arena = arena;
  device.arena_bytes = bytes;
  device.heap = Heap(reinterpret_cast<std::uintptr_t>(arena), bytes);
}

Device* Runtime::device(int ordinal) {
  if (ordinal < 0 || ordinal >= device_count()) return nullptr;
  return devices_[static_cast<std::size_t>(ordinal)].get();
}

cudaError_t Runtime::check_device(int ordinal) const {
  if (devices_.empty()) return cudaErrorNoDevice;
  if (ordinal < 0 || ordinal >= static_cast<int>(devices_.size())) return cudaErrorInvalidDevice;
  return cudaSuccess;
}

cudaError_t Runtime::allocate(int ordinal, std::size_t bytes, std::uint32_t tag, void** out) {
  Device* dev = device(ordinal);
  if (dev == nullptr) return check_device(ordinal);
  std::lock_guard lock(dev->mutex);
  const auto address = dev->heap.allocate(bytes, tag);
  if (!address) return cudaErrorMemoryAllocation;
  *out = reinterpret_cast<void*>(*address);
  return cudaSuccess;
}

cudaError_t Runtime::free(void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  for (auto& dev : devices_) {
    std::optional<Heap::Allocation> freed;
    {
      std::lock_guard lock(dev->mutex);
      if (!dev->heap.in_range(address)) continue;
      freed = dev->heap.release(address);
      if (!freed) return cudaErrorInvalidValue;  // interior pointer, or already freed
      if (freed->size >= kReleasePagesThreshold) release_pages(freed->address, freed->size);
    }
    if (const std::uint32_t pool_id = tag_pool(freed->tag); pool_id != 0) {
      std::lock_guard lock(objects_mutex);
      if (Pool* pool = pool_by_id(pool_id)) pool->used.fetch_sub(freed->size);
    }
    return cudaSuccess;
  }
  return cudaErrorInvalidValue;
}

void Runtime::reset_device(int ordinal) {
  Device* dev = device(ordinal);
  if (dev == nullptr) return;
  {
    std::lock_guard lock(objects_mutex);
    std::erase_if(streams, [&](Stream* s) {
      if (s->device != ordinal) return false;
      delete s;
      return true;
    });
    std::erase_if(events, [&](Event* e) {
      if (e->device != ordinal) return false;
      delete e;
      return true;
    });
    for (auto& pool : pools_) {
      if (pool->device != ordinal) continue;
      pool->used = 0;
      pool->used_high = 0;
      pool->reserved = 0;
      pool->reserved_high = 0;
      if (!pool->is_default) live_pools.erase(pool.get());
    }
    current_pools[static_cast<std::size_t>(ordinal)] = default_pools_[static_cast<std::size_t>(ordinal)];
  }
  std::lock_guard lock(dev->mutex);
  const std::size_t bytes = env_device_bytes();
  if (bytes - bytes % Heap::kGranularity == dev->arena_bytes && dev->arena != nullptr) {
    release_pages(reinterpret_cast<std::uintptr_t>(dev->arena), dev->arena_bytes);
    dev->heap.clear();
  } else {
    map_arena(*dev, bytes);
  }
  dev->flags = 0;
  dev->limits.clear();
}

Classified Runtime::classify(const void* p, std::size_t bytes) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  for (auto& dev : devices_) {
    std::lock_guard lock(dev->mutex);
    if (!dev->heap.in_range(address)) continue;
    const auto allocation = dev->heap.find_containing(address);
    if (!allocation) return {Where::BadDeviceRange, dev->ordinal};
    // Bound accesses by what the program asked for, not the rounded reservation, so a copy that
    // overruns its buffer is reported instead of silently landing in the neighbour.
    const std::size_t offset = address - allocation->address;
    if (bytes != 0 && (offset >= allocation->requested || bytes > allocation->requested - offset)) {
      return {Where::BadDeviceRange, dev->ordinal};
    }
    return {Where::DeviceAllocation, dev->ordinal, tag_kind(allocation->tag)};
  }
  std::lock_guard lock(objects_mutex);
  if (auto it = symbols.upper_bound(address); it != symbols.begin()) {
    --it;
    const std::size_t offset = address - it->first;
    if (offset < it->second.bytes) {
      if (bytes > it->second.bytes - offset) return {Where::BadDeviceRange, -1};
      return {Where::Symbol, current_device()};
    }
  }
  if (auto it = imports.upper_bound(address); it != imports.begin()) {
    --it;
    const std::size_t offset = address - it->first;
    if (offset < it->second.bytes) {
      if (bytes > it->second.bytes - offset) return {Where::BadDeviceRange, it->second.device};
      return {Where::DeviceAllocation, it->second.device, MemoryKind::Device};
    }
  }
  if (auto it = host_ranges.upper_bound(address); it != host_ranges.begin()) {
    --it;
    if (address - it->first < it->second.bytes) return {Where::PinnedHost, it->second.device};
  }
  return {Where::PageableHost, -1};
}

cudaError_t Runtime::stream_device(cudaStream_t stream, int* device) {
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) {
    if (const cudaError_t e = check_device(current_device()); e != cudaSuccess) return e;
    *device = current_device();
    return cudaSuccess;
  }
  std::lock_guard lock(objects_mutex);
  const auto it = streams.find(reinterpret_cast<Stream*>(stream));
  if (it == streams.end()) return cudaErrorInvalidResourceHandle;
  *device = (*it)->device;
  return cudaSuccess;
}

Pool* Runtime::new_pool(int device, bool is_default) {
  if (pools_.size() >= kMaxPools) return nullptr;  // ids must fit the 24 tag bits
  auto pool = std::make_unique<Pool>();
  pool->id = static_cast<std::uint32_t>(pools_.size() + 1);
  pool->device = device;
  pool->is_default = is_default;
  Pool* raw = pool.get();
  pools_.push_back(std::move(pool));
  live_pools.insert(raw);
  return raw;
}

Pool* Runtime::pool_by_id(std::uint32_t id) {
  if (id == 0 || id > pools_.size()) return nullptr;
  return pools_[id - 1].get();
}

}  // namespace gmt::sim
