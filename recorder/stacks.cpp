#include "recorder/stacks.h"

#include <dlfcn.h>
#include <link.h>
#include <libunwind.h>

#include <algorithm>
#include <cstring>

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
  const OwnCode& own = own_code();
  int first = 0;
  while (first < n) {
    auto pc = reinterpret_cast<uintptr_t>(frames[first]);
    if (pc < own.begin || pc >= own.end) break;
    ++first;
  }
  stack.depth = std::min(n - first, kMaxStackDepth);
  for (int i = 0; i < stack.depth; ++i) stack.pcs[i] = reinterpret_cast<uintptr_t>(frames[first + i]);
}

uint32_t StackTable::intern(const RawStack& stack) {
  if (stack.depth <= 0) return 0;
  uint64_t h = hash_pcs(stack.pcs, stack.depth);
  auto [begin, end] = ids_by_hash_.equal_range(h);
  for (auto it = begin; it != end; ++it) {
    const auto& known = stacks_[it->second - 1];
    if (known.size() == static_cast<size_t>(stack.depth) &&
        std::memcmp(known.data(), stack.pcs, known.size() * sizeof(uintptr_t)) == 0) {
      return it->second;
    }
  }
  auto id = static_cast<uint32_t>(stacks_.size() + 1);
  stacks_.emplace_back(stack.pcs, stack.pcs + stack.depth);
  ids_by_hash_.emplace(h, id);
  new_stacks_.push_back(NewStack{id, stacks_.back()});
  return id;
}

std::vector<NewStack> StackTable::take_new_stacks() {
  std::vector<NewStack> taken;
  taken.swap(new_stacks_);
  return taken;
}

}  // namespace gmt::recorder
