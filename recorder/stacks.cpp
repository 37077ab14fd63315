#include "recorder/stacks.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <libunwind.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>

#include "recorder/python_frames.h"

namespace gmt::recorder {
namespace {

// The address range of this library's own code, so that hook and recorder frames are cut from stacks
// whatever the compiler inlined. Found once, by asking the loader which object holds this function.
struct OwnCode {
  uintptr_t begin = 0;
  uintptr_t end = 0;
};

OwnCode find_own_code() {
  OwnCode own;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&find_own_code), &info) == 0 || info.dli_fbase == nullptr) return own;
  struct Search {
    uintptr_t base;
    OwnCode* own;
  } search{reinterpret_cast<uintptr_t>(info.dli_fbase), &own};
  dl_iterate_phdr(
      [](dl_phdr_info* phdr_info, size_t, void* data) -> int {
        auto* s = static_cast<Search*>(data);
        uintptr_t low = UINTPTR_MAX, high = 0;
        for (int i = 0; i < phdr_info->dlpi_phnum; ++i) {
          const auto& ph = phdr_info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD) continue;
          low = std::min<uintptr_t>(low, phdr_info->dlpi_addr + ph.p_vaddr);
          high = std::max<uintptr_t>(high, phdr_info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
        }
        if (s->base < low || s->base >= high) return 0;
        s->own->begin = low;
        s->own->end = high;
        return 1;
      },
      &search);
  return own;
}

const OwnCode& own_code() {
  static const OwnCode own = find_own_code();
  return own;
}

// Code ranges of the CUDA libraries (driver, CUPTI, shared runtime): with a driver-level backend the stack
// is taken inside them, and their frames say nothing about where the app allocated. Filled by
// skip_cuda_library_frames() before that backend records anything; read without a lock afterwards.
constexpr int kMaxSkippedRanges = 16;
OwnCode g_skipped[kMaxSkippedRanges];
std::atomic<int> g_skipped_count{0};

bool in_skipped_code(uintptr_t pc) {
  const OwnCode& own = own_code();
  if (pc >= own.begin && pc < own.end) return true;
  int n = g_skipped_count.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    if (pc >= g_skipped[i].begin && pc < g_skipped[i].end) return true;
  }
  return false;
}

uint64_t hash_pcs(const uintptr_t* pcs, int depth) {
  uint64_t h = 0xcbf29ce484222325ull ^ static_cast<uint64_t>(depth);
  for (int i = 0; i < depth; ++i) {
    h ^= pcs[i];
    h *= 0x100000001b3ull;
    h ^= h >> 29;
  }
  return h;
}

}  // namespace

void capture_stack(RawStack& stack) {
  void* frames[kMaxStackDepth + 8];
  int n = unw_backtrace(frames, kMaxStackDepth + 8);
  int first = 0;
  while (first < n && in_skipped_code(reinterpret_cast<uintptr_t>(frames[first]))) ++first;
  stack.depth = merge_python_frames(frames + first, n - first, stack.pcs, kMaxStackDepth);
  if (stack.depth >= 0) return;  // a thread running Python: its eval-loop frames became Python frames
  stack.depth = std::min(n - first, kMaxStackDepth);
  for (int i = 0; i < stack.depth; ++i) stack.pcs[i] = reinterpret_cast<uintptr_t>(frames[first + i]);
}

void skip_cuda_library_frames() {
  static const char* const kPrefixes[] = {"libcuda.so", "libcupti.so", "libcudart.so"};
  OwnCode found[kMaxSkippedRanges];
  struct Search {
    OwnCode* found;
    int count;
  } search{found, 0};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* s = static_cast<Search*>(data);
        const char* name = info->dlpi_name ? info->dlpi_name : "";
        const char* base = std::strrchr(name, '/');
        base = base ? base + 1 : name;
        bool wanted = false;
        for (const char* prefix : kPrefixes) wanted |= std::strncmp(base, prefix, std::strlen(prefix)) == 0;
        if (!wanted || s->count == kMaxSkippedRanges) return 0;
        uintptr_t low = UINTPTR_MAX, high = 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const auto& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD) continue;
          low = std::min<uintptr_t>(low, info->dlpi_addr + ph.p_vaddr);
          high = std::max<uintptr_t>(high, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
        }
        if (low < high) s->found[s->count++] = OwnCode{low, high};
        return 0;
      },
      &search);
  // Publish entries before the count, so a reader never sees a slot that is not filled yet.
  int known = g_skipped_count.load(std::memory_order_acquire);
  for (int i = 0; i < search.count && known < kMaxSkippedRanges; ++i) {
    bool duplicate = false;
    for (int j = 0; j < known; ++j) duplicate |= g_skipped[j].begin == found[i].begin;
    if (duplicate) continue;
    g_skipped[known] = found[i];
    g_skipped_count.store(++known, std::memory_order_release);
  }
}

uint64_t stack_hash(const RawStack& stack) { return hash_pcs(stack.pcs, std::max(stack.depth, 0)); }

StackTable::Interned StackTable::intern(const RawStack& stack, uint64_t h) {
  if (stack.depth <= 0) return {};
  auto [begin, end] = ids_by_hash_.equal_range(h);
  for (auto it = begin; it != end; ++it) {
    const auto& known = stacks_[it->second - 1];
    if (known.size() == static_cast<size_t>(stack.depth) &&
        std::memcmp(known.data(), stack.pcs, known.size() * sizeof(uintptr_t)) == 0) {
      return {it->second, known.data()};
    }
  }
  auto id = static_cast<uint32_t>(stacks_.size() + 1);
  // Moving the outer vector when it grows keeps every inner buffer where it is: Interned::pcs stays valid.
  stacks_.emplace_back(stack.pcs, stack.pcs + stack.depth);
  ids_by_hash_.emplace(h, id);
  new_stacks_.push_back(NewStack{id, stacks_.back()});
  return {id, stacks_.back().data()};
}

namespace {

struct StackCacheEntry {
  const StackTable* table = nullptr;
  uint64_t hash = 0;
  const uintptr_t* pcs = nullptr;
  uint32_t depth = 0;
  uint32_t id = 0;
};

constexpr size_t kStackCacheEntries = 128;  // 4 KiB per thread that records stacks
struct StackCache {
  StackCacheEntry entries[kStackCacheEntries];
};

// Allocated on the thread's first stack, freed at its exit (pthread key destructor). A pointer in
// initial-exec TLS: no allocation, no lock to read it.
thread_local StackCache* t_stack_cache __attribute__((tls_model("initial-exec"))) = nullptr;
pthread_key_t g_stack_cache_key;
bool g_stack_cache_key_made = false;

void make_stack_cache_key() {
  g_stack_cache_key_made = pthread_key_create(&g_stack_cache_key, [](void* cache) {
                             t_stack_cache = nullptr;
                             delete static_cast<StackCache*>(cache);
                           }) == 0;
}

StackCache* stack_cache_of_this_thread() {
  if (t_stack_cache) return t_stack_cache;
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, make_stack_cache_key);
  if (!g_stack_cache_key_made) return nullptr;
  auto* cache = new (std::nothrow) StackCache;
  if (!cache) return nullptr;
  if (pthread_setspecific(g_stack_cache_key, cache) != 0) {
    delete cache;
    return nullptr;
  }
  return t_stack_cache = cache;
}

}  // namespace

uint32_t cached_stack_id(const StackTable& table, const RawStack& stack, uint64_t hash) {
  const StackCache* cache = t_stack_cache;
  if (!cache || stack.depth <= 0) return 0;
  const StackCacheEntry& e = cache->entries[hash % kStackCacheEntries];
  if (e.table != &table || e.hash != hash || e.depth != static_cast<uint32_t>(stack.depth)) return 0;
  if (std::memcmp(e.pcs, stack.pcs, e.depth * sizeof(uintptr_t)) != 0) return 0;
  return e.id;
}

void remember_stack_id(const StackTable& table, const RawStack& stack, uint64_t hash,
                       StackTable::Interned interned) {
  if (interned.id == 0) return;
  StackCache* cache = stack_cache_of_this_thread();
  if (!cache) return;
  cache->entries[hash % kStackCacheEntries] =
      StackCacheEntry{&table, hash, interned.pcs, static_cast<uint32_t>(stack.depth), interned.id};
}

std::vector<NewStack> StackTable::take_new_stacks() {
  std::vector<NewStack> taken;
  taken.swap(new_stacks_);
  return taken;
}

}  // namespace gmt::recorder
