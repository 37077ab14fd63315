// Call stacks as raw return addresses, captured cheaply in the hook and deduplicated into ids.
// Symbolization happens after the run (analysis/symbolizer), so the app never pays for DWARF.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace gmt::recorder {

inline constexpr int kMaxStackDepth = 64;
inline constexpr int kStackMemoWays = 4;        // the stack memo's ways per set (recorder/stacks.cpp)
inline constexpr int kStackMemoEntries = 2048;  // its entries per thread: (stored walk, Python chain) pairs

struct RawStack {
  uintptr_t pcs[kMaxStackDepth];
  int depth = 0;
  // Set by capture_stack for a native stack (0 and false otherwise: Python frames merged in, or not captured
  // here): this thread's walk number, and whether the stack is exactly that of the thread's previous walk (the
  // same return addresses, cut the same way). record() then reuses the previous walk's stack id without
  // hashing and comparing the stack again.
  uint64_t walk = 0;
  bool repeats_previous_walk = false;
  // The stack memo (capture_stack): a stack that this thread took before at the same stored walk
  // (unwind::WalkIdentity) with the same Python frames comes with its id already (known_id, in the table whose
  // StackTable::serial is known_table); otherwise memo_slot/memo_version name the memo entry that record() fills once
  // the stack has its id.
  uint32_t known_id = 0;
  uint32_t known_table = 0;
  const uintptr_t* known_pcs = nullptr;  // with known_id: its frames (the table's copy), pcs left unfilled
  uint32_t memo_slot = 0;                // 1..kStackMemoEntries; 0: none
  uint32_t memo_version = 0;
  uint32_t check_memo_id = 0;  // GMT_UNWIND=check: the memo's answer, to compare with this full stack's id
};

// Fills `stack` with the return addresses of the current thread, innermost first, starting at the first
// frame outside this library (the caller of the hooked CUDA function). Walks with unwind/fast_unwind.h and
// falls back to libunwind's unw_backtrace where that walker gives up (settings().unwind chooses; glibc's
// backtrace() would cost ~10 us per event, FACTS.md).
void capture_stack(RawStack& stack);

// GMT_BLOCK_STACKS=python (schema/environment.h): the thread's Python frames only, no native walk, answered by the
// stack memo under the Python chain's key alone. False where the thread runs no Python (or its frames cannot be read):
// the caller then takes the whole stack (capture_stack).
bool capture_python_only_stack(RawStack& stack);

// For the trace's meta (schema::meta::kStackWalks*, kStackMemo*): walks done with libunwind, and under
// GMT_UNWIND=check the walks compared and those that differed; stacks answered by the stack memo, and under
// GMT_UNWIND=check those also taken in full and compared, and those that differed (each one a wrong stack in the
// trace: the first few differing pairs of stack ids are kept for the report).
struct StackWalkCounts {
  uint64_t libunwind = 0;
  uint64_t checked = 0;
  uint64_t mismatches = 0;
  uint64_t memo_hits = 0;  // counted per thread, added here every 64 hits: up to 63 per thread are not in it
  uint64_t memo_checked = 0;
  uint64_t memo_mismatches = 0;
  uint64_t walks = 0;             // stacks captured, counted per thread by 64s
  uint64_t stored_walks = 0;      // among them, walks a stored walk answered (fast_unwind.cpp) without walking
  uint64_t walks_to_the_cut = 0;  // among those, answers checked up to CPython's eval loop only
  uint64_t walk_word_checks = 0;  // stored walks checked word by word, matching or not (by 64 walks, as walks)
  uint64_t walk_evictions = 0;    // stored walks overwritten while still valid, their set full (by 64 walks)
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
  // Names this table among the process's (a forked child's recorder has a table of its own): the stack memo keeps
  // it in four bytes, where a pointer would not let an entry fit 32.
  uint32_t serial() const { return serial_; }

 private:
  static uint32_t next_serial();
  const uint32_t serial_ = next_serial();
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
uint32_t cached_stack_id(const StackTable& table, const RawStack& stack, uint64_t& hash,
                         const uintptr_t** table_pcs = nullptr);
void remember_stack_id(const StackTable& table, const RawStack& stack, uint64_t hash, StackTable::Interned interned);

// The id of a captured stack, as record() takes it: known already when the stack memo answered, else found in this
// thread's cache or interned by `intern` (which takes the table's lock: the recorder's); then kept in the memo
// entry the capture named, and under GMT_UNWIND=check compared with the memo's answer.
using InternNewStack = StackTable::Interned (*)(void* context, const RawStack& stack, uint64_t hash);
uint32_t stack_id_of(const StackTable& table, const RawStack& captured, InternNewStack intern, void* context);

// Under GMT_UNWIND=check, a stack the memo answered is taken in full as well (capture_stack does both): when the
// two differ, the full stack is the one recorded, and record() tells the memo's id and the full one's here.
void note_stack_memo_mismatch(uint32_t memo_id, uint32_t full_id);
// The first differing pairs, "memo:full,memo:full" (at most 16), for the trace's meta.
std::string stack_memo_mismatch_examples();

// Tests only: makes every entry of this thread's stack memo answer with `id` (a stale entry), so that the check
// mode's count can be seen to catch it.
void plant_stale_stack_memo_for_testing(uint32_t id);

}  // namespace gmt::recorder
