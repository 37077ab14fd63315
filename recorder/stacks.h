// Call stacks as raw return addresses, captured cheaply in the hook and deduplicated into ids.
// Symbolization happens after the run (analysis/symbolizer), so the app never pays for DWARF.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace gmt::recorder {

inline constexpr int kMaxStackDepth = 64;

struct RawStack {
  uintptr_t pcs[kMaxStackDepth];
  int depth = 0;
  // Set by capture_stack for a native stack (0 and false otherwise: Python frames merged in, or not captured
  // here): this thread's walk number, and whether the stack is exactly that of the thread's previous walk (the
  // same return addresses, cut the same way). record() then reuses the previous walk's stack id without
  // hashing and comparing the stack again.
  uint64_t walk = 0;
  bool repeats_previous_walk = false;
};

// Fills `stack` with the return addresses of the current thread, innermost first, starting at the first
// frame outside this library (the caller of the hooked CUDA function). Walks with unwind/fast_unwind.h and
// falls back to libunwind's unw_backtrace where that walker gives up (settings().unwind chooses; glibc's
// backtrace() would cost ~10 us per event, FACTS.md).
void capture_stack(RawStack& stack);

// For the trace's meta (schema::meta::kStackWalks*): walks done with libunwind, and under GMT_UNWIND=check the
// walks compared and those that differed.
struct StackWalkCounts {
  uint64_t libunwind = 0;
  uint64_t checked = 0;
  uint64_t mismatches = 0;
};
StackWalkCounts stack_walk_counts();

// Also cut frames inside the CUDA driver, CUPTI and the shared CUDA runtime from the top of every stack from
// now on (the libraries loaded at the time of the call). Called when a driver-level backend starts; may be
// called again later (e.g. a runtime loaded afterwards). Not thread-safe against itself.
void skip_cuda_library_frames();

// A stack that was interned for the first time and must still be written to the trace.
struct NewStack {
  uint32_t id;
  std::vector<uintptr_t> pcs;
};

// The hash by which stacks are interned and cached, computed once per event, outside the recorder's lock.
uint64_t stack_hash(const RawStack& stack);

// Interns stacks: equal PC sequences get equal ids (1, 2, ...). Not thread-safe: the recorder calls it
// under its lock. New stacks are queued for the writer.
class StackTable {
 public:
  struct Interned {
    uint32_t id = 0;
    const uintptr_t* pcs = nullptr;  // the table's copy: never moves nor changes (tables are never destroyed)
  };
  Interned intern(const RawStack& stack, uint64_t hash);
  uint32_t intern(const RawStack& stack) { return intern(stack, stack_hash(stack)).id; }
  std::vector<NewStack> take_new_stacks();
  size_t size() const { return stacks_.size(); }

 private:
  std::unordered_multimap<uint64_t, uint32_t> ids_by_hash_;
  std::vector<std::vector<uintptr_t>> stacks_;  // index id - 1
  std::vector<NewStack> new_stacks_;
};

// A per-thread memo in front of a StackTable, so that a stack this thread recorded before is found without the
// recorder's lock. The stack of this thread's previous event again (the same capture, or a walk that found the
// same frames: RawStack::walk) costs nothing; another costs its hash (left in `hash` for intern()) and one
// compare of its PCs. Exact: a hit compares every PC and the depth against the table's copy, so it returns
// what intern() would; entries of another table (a forked child's fresh recorder) never match. Direct-mapped:
// a colliding stack replaces the entry. 0: not known, intern it.
uint32_t cached_stack_id(const StackTable& table, const RawStack& stack, uint64_t& hash);
void remember_stack_id(const StackTable& table, const RawStack& stack, uint64_t hash, StackTable::Interned interned);

}  // namespace gmt::recorder
