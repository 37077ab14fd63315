#include "recorder/stacks.h"

#include <dlfcn.h>
#include <libunwind.h>
#include <link.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <string>

#include "recorder/cache_hints.h"
#include "recorder/self_cost.h"
#include "recorder/settings.h"
#include "unwind/fast_unwind.h"
#include "unwind/module_ranges.h"
#include "unwind/python_frames.h"

namespace gmt::recorder {
namespace {

using unwind::fast_backtrace;
using unwind::merge_python_frames;

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
  unwind::ModuleRange range = unwind::module_range_containing(reinterpret_cast<uintptr_t>(info.dli_fbase));
  return OwnCode{range.begin, range.end};
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

GMT_HOT bool in_skipped_code(uintptr_t pc) {
  const OwnCode& own = own_code();
  if (pc >= own.begin && pc < own.end) return true;
  int n = g_skipped_count.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    if (pc >= g_skipped[i].begin && pc < g_skipped[i].end) return true;
  }
  return false;
}

// Two independent multiply chains (even and odd frames) mixed once at the end: a chain of one xor and one
// multiply per frame is the hash's latency, and two of them run side by side. Quality only decides how often
// two stacks share a table bucket; every hit is confirmed by comparing all PCs.
GMT_HOT uint64_t hash_pcs(const uintptr_t* pcs, int depth) {
  constexpr uint64_t kEven = 0x9e3779b97f4a7c15ull, kOdd = 0xc2b2ae3d27d4eb4full;
  uint64_t even = kOdd ^ static_cast<uint64_t>(depth), odd = kEven;
  int i = 0;
  for (; i + 1 < depth; i += 2) {
    even = (even ^ pcs[i]) * kEven;
    odd = (odd ^ pcs[i + 1]) * kOdd;
  }
  if (i < depth) even = (even ^ pcs[i]) * kEven;
  uint64_t h = even ^ ((odd << 31) | (odd >> 33));
  h ^= h >> 32;
  h *= kEven;
  h ^= h >> 29;
  return h;
}

constexpr int kWalkFrames = kMaxStackDepth + 8;  // a few more than kept: our own frames are cut from the top

// Walks counted for the trace (meta stack_walks_*): rare events only, so that no two threads share a counter's
// cache line on every allocation.
std::atomic<uint64_t> g_libunwind_walks{0};
std::atomic<uint64_t> g_checked_walks{0};
std::atomic<uint64_t> g_walk_mismatches{0};
std::atomic<uint64_t> g_memo_hits{0};
std::atomic<uint64_t> g_memo_checked{0};
std::atomic<uint64_t> g_memo_mismatches{0};
thread_local uint32_t t_memo_hits __attribute__((tls_model("initial-exec"))) = 0;  // not yet in g_memo_hits
// Stacks captured, and those a stored walk answered (unwind::fast_backtrace_replays_in_this_thread), added to the
// totals every 64 captures of a thread: the store's hit rate, for the trace's meta.
std::atomic<uint64_t> g_walks_counted{0};
std::atomic<uint64_t> g_walks_stored{0};
std::atomic<uint64_t> g_walks_to_the_cut{0};
std::atomic<uint64_t> g_walk_word_checks{0};
std::atomic<uint64_t> g_walk_evictions{0};
thread_local uint64_t t_walks_stored_counted __attribute__((tls_model("initial-exec"))) = 0;
thread_local uint64_t t_walks_to_the_cut_counted __attribute__((tls_model("initial-exec"))) = 0;
thread_local uint64_t t_walk_word_checks_counted __attribute__((tls_model("initial-exec"))) = 0;
thread_local uint64_t t_walk_evictions_counted __attribute__((tls_model("initial-exec"))) = 0;

// This thread's walks, numbered, and the skipped ranges its last walk was cut by (RawStack::walk).
thread_local uint64_t t_walks __attribute__((tls_model("initial-exec"))) = 0;
thread_local int t_skipped_ranges_at_last_walk __attribute__((tls_model("initial-exec"))) = -1;
// Where the previous walk's frames left our code and the CUDA libraries (-1: not known).
thread_local int t_first_frame_at_last_walk __attribute__((tls_model("initial-exec"))) = -1;

GMT_HOT int first_frame_outside_skipped_code(void* const* frames, int n) {
  int first = 0;
  while (first < n && in_skipped_code(reinterpret_cast<uintptr_t>(frames[first]))) ++first;
  return first;
}

// GMT_UNWIND=check: both walkers on this stack. Their first frames differ (two call sites in our code, cut
// anyway); from the first frame outside our code on they must be equal, up to the cut where the fast walk's answer
// ends there (what lies beyond is the stack memo's to answer, and record() compares that). libunwind's stack is
// the one kept.
GMT_COLD int walk_both_and_compare(void** frames, unwind::WalkIdentity& identity, unwind::StoredAnswer answer) {
  void* fast[kWalkFrames];
  int n_fast = fast_backtrace(fast, kWalkFrames, nullptr, &identity, nullptr, answer);
  int n = unw_backtrace(frames, kWalkFrames);
  if (n_fast < 0) {
    g_libunwind_walks.fetch_add(1, std::memory_order_relaxed);
    return n;
  }
  g_checked_walks.fetch_add(1, std::memory_order_relaxed);
  int first_fast = first_frame_outside_skipped_code(fast, n_fast);
  int first = first_frame_outside_skipped_code(frames, n);
  const int compared = n_fast - first_fast;
  bool same = (identity.frames_end_at_cut ? compared <= n - first : compared == n - first) &&
              std::memcmp(fast + first_fast, frames + first, sizeof(void*) * static_cast<size_t>(compared)) == 0;
  identity.frames_end_at_cut = false;            // the frames returned are libunwind's, all of them
  if (!same) identity = unwind::WalkIdentity{};  // its stored answer is not the stack recorded
  if (!same && g_walk_mismatches.fetch_add(1, std::memory_order_relaxed) == 0) {
    int at = 0;
    while (at < n - first && at < n_fast - first_fast && fast[first_fast + at] == frames[first + at]) ++at;
    std::fprintf(stderr,
                 "gpumemtrace: GMT_UNWIND=check: the fast stack walk differs from libunwind's at frame %d "
                 "(%p against %p; %d against %d frames)\n",
                 at, at < n_fast - first_fast ? fast[first_fast + at] : nullptr,
                 at < n - first ? frames[first + at] : nullptr, n_fast - first_fast, n - first);
  }
  return n;
}

// `same_as_previous`: the fast walker found exactly the return addresses of this thread's previous walk.
// `identity`: the fast walker's stored walk that gave these frames (unwind::WalkIdentity), or none.
// `stored`: set where a stored walk answered, to its frames (then not copied into `frames`).
// `answer`: kToTheCut where the stack memo may answer for the frames beyond the cut (identity.frames_end_at_cut
// then says that the frames returned stop there).
GMT_HOT int walk_stack(void** frames, bool& same_as_previous, unwind::WalkIdentity& identity, void* const*& stored,
                       unwind::StoredAnswer answer) {
  same_as_previous = false;
  identity = unwind::WalkIdentity{};
  stored = nullptr;
  switch (settings().unwind) {
    case UnwindMode::Fast: {
      int n = fast_backtrace(frames, kWalkFrames, &same_as_previous, &identity, &stored, answer);
      if (n >= 0) return n;
      break;
    }
    case UnwindMode::Check: return walk_both_and_compare(frames, identity, answer);
    case UnwindMode::Libunwind: break;
  }
  g_libunwind_walks.fetch_add(1, std::memory_order_relaxed);
  return unw_backtrace(frames, kWalkFrames);
}

}  // namespace

StackWalkCounts stack_walk_counts() {
  return {g_libunwind_walks.load(std::memory_order_relaxed),  g_checked_walks.load(std::memory_order_relaxed),
          g_walk_mismatches.load(std::memory_order_relaxed),  g_memo_hits.load(std::memory_order_relaxed),
          g_memo_checked.load(std::memory_order_relaxed),     g_memo_mismatches.load(std::memory_order_relaxed),
          g_walks_counted.load(std::memory_order_relaxed),    g_walks_stored.load(std::memory_order_relaxed),
          g_walks_to_the_cut.load(std::memory_order_relaxed), g_walk_word_checks.load(std::memory_order_relaxed),
          g_walk_evictions.load(std::memory_order_relaxed)};
}

namespace {

// The stack memo: per thread, by stored walk of the fast walker (unwind::WalkIdentity: the same native frames,
// found by checking the stack words they depend on rather than by walking) and Python chain
// (unwind::python_chain_key), the merged stack's id. A stack taken again at the same place with the same Python
// frames is then neither walked, nor merged, nor hashed: its id is known. One table for all of a thread's walks,
// set-associative by (walk, chain): a walk reached from many Python chains (one native place under many Python
// lines; with the cut below, every stack that shares its words up to the eval loop) has as many entries as it
// needs, and the walks that have few leave theirs to it. Exact as far as the walk's
// check and the signature are (see both); GMT_UNWIND=check takes every memo answer in full too and counts the
// differences (meta stack_memo_mismatches).
//
// With GMT_STACK_CUT=1 (off by default: on an H100 its walk phase took longer than without it, also once the
// self-cost sample was corrected, docs/benchmarks.md 2026-12-07), in a Python thread the walk is checked only up to its
// first frame in CPython's eval loop (unwind::StoredAnswer::kToTheCut): the native frames beyond it are taken to be
// the same whenever the Python frame chain is, which the memo's key already says. That is the one assumption the memo
// adds to the walk's own check: a native caller that reaches the same Python frames (same frame addresses, code and
// positions) by another native path with the same stack depth would get the first path's stack; the check mode counts
// any such answer as a mismatch.
//
// Small: a lookup reads its set between the app's own work, from far caches (on an H100 the memo's lookup and the
// chain's key took 276-293 ns per block event together). An entry takes 32 bytes, a set of four two cache lines
// (40-byte entries spread a set over three or four).
struct StackMemoEntry {
  uint64_t python_key = 0;         // unwind::python_chain_key(); 0: no Python frames
  const uintptr_t* pcs = nullptr;  // the table's copy (never moves)
  uint32_t walk_version = 0;       // the stored walk's version it was taken at; 0: empty
  uint32_t id = 0;                 // 0: not known yet (record() fills it)
  uint32_t table = 0;              // StackTable::serial of the table the id is in
  int16_t skipped_ranges = -1;     // the cut (skip_cuda_library_frames) it was taken with
  int16_t depth = 0;
};
static_assert(sizeof(StackMemoEntry) == 32, "a set of four ways in two cache lines");
static_assert(kMaxStackDepth <= INT16_MAX);

constexpr int kStackMemoSetBits = 9;  // 512 sets of kStackMemoWays: 2048 entries, 64 KiB per thread
constexpr uint32_t kStackMemoSets = 1u << kStackMemoSetBits;
static_assert(kStackMemoSets * kStackMemoWays == kStackMemoEntries);

struct StackMemo {
  alignas(64) StackMemoEntry entries[kStackMemoEntries];
  uint8_t next_victim[kStackMemoSets] = {};
};

// A stored walk's version names it within its thread (fast_unwind.cpp: versions are never reused across slots).
GMT_HOT uint32_t stack_memo_set_of(uint32_t walk_version, uint64_t python_key) {
  const uint64_t h = (static_cast<uint64_t>(walk_version) * 0x9e3779b97f4a7c15ull ^ python_key) * 0xc2b2ae3d27d4eb4full;
  return static_cast<uint32_t>(h >> (64 - kStackMemoSetBits));
}

StackMemo* stack_memo_of_this_thread();

GMT_HOT bool look_up_stack_memo(RawStack& stack, unwind::WalkIdentity identity, int skipped, uint64_t python_key) {
  StackMemo* memo = stack_memo_of_this_thread();
  if (!memo || skipped > INT16_MAX) return false;  // the skipped ranges are the CUDA libraries found: a few
  const uint32_t set = stack_memo_set_of(identity.version, python_key);
  StackMemoEntry* ways = &memo->entries[set * kStackMemoWays];
  for (int way = 0; way < kStackMemoWays; ++way) {
    const StackMemoEntry& e = ways[way];
    if (e.walk_version != identity.version || e.skipped_ranges != skipped || e.python_key != python_key || e.id == 0) {
      continue;
    }
    stack.depth = e.depth;  // its frames are the table's (known_pcs), not copied
    stack.known_id = e.id;
    stack.known_table = e.table;
    stack.known_pcs = e.pcs;
    if (++t_memo_hits == 64) {
      g_memo_hits.fetch_add(64, std::memory_order_relaxed);
      t_memo_hits = 0;
    }
    return true;
  }
  // Not known: this capture's id goes into the way after the one filled last (record(): remember_in_stack_memo).
  const uint8_t way = memo->next_victim[set];
  memo->next_victim[set] = static_cast<uint8_t>((way + 1) % kStackMemoWays);
  ways[way] = StackMemoEntry{python_key, nullptr, identity.version, 0, 0, static_cast<int16_t>(skipped), 0};
  stack.memo_slot = set * kStackMemoWays + way + 1;
  stack.memo_version = identity.version;
  return false;
}

// What a capture says besides its frames, cleared before it says it.
void forget_previous_capture(RawStack& stack) {
  stack.walk = 0;
  stack.repeats_previous_walk = false;
  stack.known_id = 0;
  stack.known_table = 0;
  stack.known_pcs = nullptr;
  stack.memo_slot = 0;
  stack.check_memo_id = 0;
}

}  // namespace

GMT_HOT void capture_stack(RawStack& stack) {
  void* frames[kWalkFrames];
  bool same_pcs = false;
  unwind::WalkIdentity identity;
  void* const* stored = nullptr;  // the walk's frames, where a stored walk answered (not copied into frames yet)
  const bool memo_on = settings().stack_memo;
  const bool cutting = memo_on && settings().stack_cut;
  int n = walk_stack(frames, same_pcs, identity, stored,
                     cutting ? unwind::StoredAnswer::kToTheCut : unwind::StoredAnswer::kWhole);
  mark_cost_phase(CostPhase::Walk);
  // The cut depends on the skipped ranges too, which grow when a CUDA library is registered later.
  const int skipped = g_skipped_count.load(std::memory_order_acquire);
  const bool same_cut = skipped == t_skipped_ranges_at_last_walk;
  t_skipped_ranges_at_last_walk = skipped;
  const uint64_t walk = ++t_walks;
  if (walk % 64 == 0) {
    const uint64_t stored_walks = unwind::fast_backtrace_replays_in_this_thread();
    g_walks_counted.fetch_add(64, std::memory_order_relaxed);
    g_walks_stored.fetch_add(stored_walks - t_walks_stored_counted, std::memory_order_relaxed);
    t_walks_stored_counted = stored_walks;
    const uint64_t to_the_cut = unwind::fast_backtrace_cut_answers_in_this_thread();
    g_walks_to_the_cut.fetch_add(to_the_cut - t_walks_to_the_cut_counted, std::memory_order_relaxed);
    t_walks_to_the_cut_counted = to_the_cut;
    const uint64_t word_checks = unwind::fast_backtrace_word_checks_in_this_thread();
    g_walk_word_checks.fetch_add(word_checks - t_walk_word_checks_counted, std::memory_order_relaxed);
    t_walk_word_checks_counted = word_checks;
    const uint64_t evictions = unwind::fast_backtrace_evictions_in_this_thread();
    g_walk_evictions.fetch_add(evictions - t_walk_evictions_counted, std::memory_order_relaxed);
    t_walk_evictions_counted = evictions;
  }
  forget_previous_capture(stack);
  bool memo_answered = false;
  if (identity.slot != 0 && memo_on) {
    const uint64_t python_key = unwind::python_chain_key();
    mark_cost_phase(CostPhase::PythonKey);
    // With the cut, a walk kept to the cut stands for its frames beyond the cut only together with a Python chain.
    if (!(cutting && identity.cut) || python_key != 0) {
      memo_answered = look_up_stack_memo(stack, identity, skipped, python_key);
    }
  }
  mark_cost_phase(CostPhase::Memo);
  if (memo_answered) {
    t_first_frame_at_last_walk = -1;  // not computed for this walk
    if (settings().unwind != UnwindMode::Check) return;
    stack.check_memo_id = stack.known_id;  // and take it in full below, to compare (record() does)
    stack.known_id = 0;
    stack.known_table = 0;
    stack.known_pcs = nullptr;
  }
  if (identity.frames_end_at_cut) {  // the memo did not know the rest: the whole stack, kept walk or fresh one
    unwind::WalkIdentity whole;
    n = walk_stack(frames, same_pcs, whole, stored, unwind::StoredAnswer::kWholeUnkept);
    mark_cost_phase(CostPhase::Walk);
  }
  if (stored) std::memcpy(frames, stored, sizeof(void*) * static_cast<size_t>(n));
  // The same frames cut by the same ranges are cut at the same place.
  int first = same_pcs && same_cut && t_first_frame_at_last_walk >= 0 ? t_first_frame_at_last_walk
                                                                      : first_frame_outside_skipped_code(frames, n);
  t_first_frame_at_last_walk = first;
  unwind::PythonStack python;
  if (unwind::read_python_stack(python)) {  // a thread running Python: its eval-loop frames become Python frames
    stack.depth = unwind::merge_python_frames(python, frames + first, n - first, stack.pcs, kMaxStackDepth);
    mark_cost_phase(CostPhase::PythonMerge);
    return;
  }
  stack.depth = std::min(n - first, kMaxStackDepth);
  static_assert(sizeof(uintptr_t) == sizeof(void*));
  std::memcpy(stack.pcs, frames + first, sizeof(uintptr_t) * static_cast<size_t>(stack.depth));
  stack.walk = walk;
  stack.repeats_previous_walk = same_pcs && same_cut;
}

GMT_HOT bool capture_python_only_stack(RawStack& stack) {
  mark_cost_phase(CostPhase::Walk);  // no walk: its phase stays ~0
  const uint64_t python_key = unwind::python_chain_key();
  mark_cost_phase(CostPhase::PythonKey);
  if (python_key == 0) return false;
  forget_previous_capture(stack);
  // Under the walk version 0, which no stored walk has: these entries never answer a native stack's capture.
  const bool answered =
      settings().stack_memo && look_up_stack_memo(stack, unwind::WalkIdentity{}, /*skipped=*/0, python_key);
  mark_cost_phase(CostPhase::Memo);
  if (answered) return true;
  unwind::PythonStack python;
  if (!unwind::read_python_stack(python)) return false;
  stack.depth = unwind::merge_python_frames(python, nullptr, 0, stack.pcs, kMaxStackDepth);
  mark_cost_phase(CostPhase::PythonMerge);
  return stack.depth > 0;
}

void skip_cuda_library_frames() {
  static const char* const kPrefixes[] = {"libcuda.so", "libcupti.so", "libcudart.so"};
  OwnCode found[kMaxSkippedRanges];
  int count = 0;
  unwind::for_each_module([&](const unwind::LoadedModule& module) {
    const char* name = module.info->dlpi_name ? module.info->dlpi_name : "";
    const char* base = std::strrchr(name, '/');
    base = base ? base + 1 : name;
    bool wanted = false;
    for (const char* prefix : kPrefixes) wanted |= std::strncmp(base, prefix, std::strlen(prefix)) == 0;
    if (!wanted || count == kMaxSkippedRanges) return false;
    if (!module.range.empty()) found[count++] = OwnCode{module.range.begin, module.range.end};
    return false;
  });
  // Publish entries before the count, so a reader never sees a slot that is not filled yet.
  int known = g_skipped_count.load(std::memory_order_acquire);
  for (int i = 0; i < count && known < kMaxSkippedRanges; ++i) {
    bool duplicate = false;
    for (int j = 0; j < known; ++j) duplicate |= g_skipped[j].begin == found[i].begin;
    if (duplicate) continue;
    g_skipped[known] = found[i];
    g_skipped_count.store(++known, std::memory_order_release);
  }
}

GMT_HOT uint64_t stack_hash(const RawStack& stack) { return hash_pcs(stack.pcs, std::max(stack.depth, 0)); }

uint32_t StackTable::next_serial() {
  static std::atomic<uint32_t> serials{0};
  return serials.fetch_add(1, std::memory_order_relaxed) + 1;  // 0: no table (RawStack::known_table)
}

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
  StackMemo memo;  // 64 KiB
};

// The stack id of this thread's last recorded native stack, by walk number (RawStack::walk).
struct LastStack {
  uint64_t walk = 0;
  const StackTable* table = nullptr;
  uint32_t id = 0;
  const uintptr_t* pcs = nullptr;  // the table's copy
};
thread_local LastStack t_last_stack __attribute__((tls_model("initial-exec")));

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

StackMemo* stack_memo_of_this_thread() { return t_stack_cache ? &t_stack_cache->memo : nullptr; }

std::mutex g_memo_examples_mutex;
std::string g_memo_examples;  // "memo:full,..."
int g_memo_example_count = 0;

}  // namespace

namespace {

// The stack memo's entry for `stack` (RawStack::memo_slot), once its id in `table` is known.
void remember_in_stack_memo(const StackTable& table, const RawStack& stack, StackTable::Interned interned) {
  StackMemo* memo = stack_memo_of_this_thread();
  if (!memo || stack.memo_slot == 0 || interned.id == 0) return;
  StackMemoEntry& e = memo->entries[stack.memo_slot - 1];
  if (e.walk_version != stack.memo_version) return;  // another capture took the entry meanwhile
  e.table = table.serial();
  e.pcs = interned.pcs;
  e.depth = static_cast<int16_t>(stack.depth);
  e.id = interned.id;
}

}  // namespace

GMT_HOT uint32_t stack_id_of(const StackTable& table, const RawStack& captured, InternNewStack intern, void* context) {
  if (captured.known_id != 0 && captured.known_table == table.serial()) return captured.known_id;
  RawStack copy;  // a memo answer of another table (a forked child's first stacks): its frames, interned here
  if (captured.known_id != 0 && captured.known_pcs) {
    copy.depth = captured.depth;
    std::memcpy(copy.pcs, captured.known_pcs, sizeof(uintptr_t) * static_cast<size_t>(captured.depth));
  }
  const RawStack& stack = captured.known_id != 0 ? copy : captured;
  uint64_t hash = 0;
  StackTable::Interned interned;
  interned.id = cached_stack_id(table, stack, hash, &interned.pcs);
  if (stack.depth > 0 && interned.id == 0) interned = intern(context, stack, hash);
  if (captured.memo_slot != 0) remember_in_stack_memo(table, captured, interned);
  if (captured.check_memo_id != 0) note_stack_memo_mismatch(captured.check_memo_id, interned.id);
  return interned.id;
}

void note_stack_memo_mismatch(uint32_t memo_id, uint32_t full_id) {
  g_memo_checked.fetch_add(1, std::memory_order_relaxed);
  if (memo_id == full_id) return;
  g_memo_mismatches.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(g_memo_examples_mutex);
  if (g_memo_example_count == 16) return;
  ++g_memo_example_count;
  g_memo_examples += (g_memo_examples.empty() ? "" : ",") + std::to_string(memo_id) + ":" + std::to_string(full_id);
}

std::string stack_memo_mismatch_examples() {
  std::lock_guard lock(g_memo_examples_mutex);
  return g_memo_examples;
}

void plant_stale_stack_memo_for_testing(uint32_t id) {
  StackMemo* memo = stack_memo_of_this_thread();
  if (!memo) return;
  for (StackMemoEntry& e : memo->entries) {
    if (e.id != 0) e.id = id;
  }
}

GMT_HOT uint32_t cached_stack_id(const StackTable& table, const RawStack& stack, uint64_t& hash,
                                 const uintptr_t** table_pcs) {
  hash = 0;
  if (stack.depth <= 0) return 0;
  LastStack& last = t_last_stack;
  if (stack.walk != 0 && last.table == &table &&
      (last.walk == stack.walk || (stack.repeats_previous_walk && last.walk + 1 == stack.walk))) {
    last.walk = stack.walk;
    if (table_pcs) *table_pcs = last.pcs;
    return last.id;
  }
  hash = stack_hash(stack);
  const StackCache* cache = t_stack_cache;
  if (!cache) return 0;
  const StackCacheEntry& e = cache->entries[hash % kStackCacheEntries];
  if (e.table != &table || e.hash != hash || e.depth != static_cast<uint32_t>(stack.depth)) return 0;
  if (std::memcmp(e.pcs, stack.pcs, e.depth * sizeof(uintptr_t)) != 0) return 0;
  if (stack.walk != 0) last = LastStack{stack.walk, &table, e.id, e.pcs};
  if (table_pcs) *table_pcs = e.pcs;
  return e.id;
}

void remember_stack_id(const StackTable& table, const RawStack& stack, uint64_t hash, StackTable::Interned interned) {
  if (interned.id == 0) return;
  if (stack.walk != 0) t_last_stack = LastStack{stack.walk, &table, interned.id, interned.pcs};
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
