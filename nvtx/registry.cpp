#include "nvtx/registry.h"

#include <atomic>
#include <cstddef>

#include "recorder/strings.h"

namespace gmt::nvtx {
namespace {

// Open addressing, keys are handle values (never 0), values are never 0 once published. Insertion claims a
// slot with a CAS on the key and then publishes the value: a reader that sees the key first reads 0
// ("unknown") - only possible for a handle that has not been returned to the app yet.
template <unsigned kBits>
class HandleMap {
 public:
  uint32_t find(uintptr_t key) const {
    for (size_t n = 0, i = slot_of(key); n < kSlots; ++n, i = (i + 1) & (kSlots - 1)) {
      uintptr_t k = keys_[i].load(std::memory_order_acquire);
      if (k == key) return values_[i].load(std::memory_order_acquire);
      if (k == 0) return 0;
    }
    return 0;
  }

  // Sets the value of `key` (a handle value may come back for a new domain after nvtxDomainDestroy).
  bool assign(uintptr_t key, uint32_t value) {
    for (size_t n = 0, i = slot_of(key); n < kSlots; ++n, i = (i + 1) & (kSlots - 1)) {
      uintptr_t k = keys_[i].load(std::memory_order_acquire);
      if (k == 0) {
        if (used_.fetch_add(1, std::memory_order_relaxed) >= kSlots / 4 * 3) {  // keep probes short
          used_.fetch_sub(1, std::memory_order_relaxed);
          return false;
        }
        uintptr_t expected = 0;
        if (keys_[i].compare_exchange_strong(expected, key, std::memory_order_acq_rel)) {
          values_[i].store(value, std::memory_order_release);
          return true;
        }
        used_.fetch_sub(1, std::memory_order_relaxed);
        k = expected;  // another thread took the slot: maybe for this very key
      }
      if (k == key) {
        values_[i].store(value, std::memory_order_release);
        return true;
      }
    }
    return false;
  }

 private:
  static constexpr size_t kSlots = size_t{1} << kBits;
  static size_t slot_of(uintptr_t key) {
    return static_cast<size_t>((key >> 3) * 0x9E3779B97F4A7C15ull >> (64 - kBits));
  }

  std::atomic<uintptr_t> keys_[kSlots] = {};
  std::atomic<uint32_t> values_[kSlots] = {};
  std::atomic<size_t> used_{0};
};

constexpr uint32_t kMaxDomains = 3000;

// Static storage (zero-initialized, never destroyed): usable from any constructor or destructor.
HandleMap<12> g_domain_handles;  // value: index in g_domains + 1
DomainInfo g_domains[kMaxDomains];
std::atomic<uint32_t> g_domain_count{0};
HandleMap<16> g_string_handles;  // value: name_id

// Our own handles are addresses in this reserved block (bss: no memory until touched, and it never is), so
// that whether a handle is ours is a range check, whatever happened to the tables. Past the block: nullptr,
// which NVTX handles as "no domain / no string".
constexpr size_t kFakeHandles = size_t{1} << 17;
alignas(16) char g_fake_space[kFakeHandles];
std::atomic<size_t> g_next_fake{0};

const void* fake_handle() {
  size_t i = g_next_fake.fetch_add(1, std::memory_order_relaxed);
  return i < kFakeHandles ? &g_fake_space[i] : nullptr;
}

}  // namespace

bool is_fake(const void* handle) {
  auto* p = static_cast<const char*>(handle);
  return p >= g_fake_space && p < g_fake_space + kFakeHandles;
}

DomainInfo find_domain(const void* handle) {
  if (!handle) return DomainInfo{};
  uint32_t value = g_domain_handles.find(reinterpret_cast<uintptr_t>(handle));
  if (value == 0 || value > kMaxDomains) {
    return DomainInfo{recorder::intern_string("(unknown domain)"), false, is_fake(handle)};
  }
  DomainInfo info = g_domains[value - 1];
  info.fake = is_fake(handle);
  return info;
}

const void* register_domain(uint32_t name_id, const void* chained, bool own) {
  const void* handle = chained ? chained : fake_handle();
  if (!handle) return nullptr;
  uint32_t index = g_domain_count.fetch_add(1, std::memory_order_relaxed);
  if (index >= kMaxDomains) return handle;  // full: the app still gets a working handle, named "unknown"
  g_domains[index] = DomainInfo{name_id, own, false};
  g_domain_handles.assign(reinterpret_cast<uintptr_t>(handle), index + 1);  // publishes g_domains[index]
  return handle;
}

StringInfo find_string(const void* handle) {
  if (!handle) return StringInfo{};
  return StringInfo{g_string_handles.find(reinterpret_cast<uintptr_t>(handle)), is_fake(handle)};
}

const void* register_string(uint32_t name_id, const void* chained) {
  const void* handle = chained ? chained : fake_handle();
  if (handle) g_string_handles.assign(reinterpret_cast<uintptr_t>(handle), name_id);
  return handle;
}

}  // namespace gmt::nvtx
