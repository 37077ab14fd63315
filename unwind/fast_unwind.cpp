// See fast_unwind.h. Two parts: the global table of rules by code address, filled from .eh_frame
// (eh_frame_rules.h) on a miss, and the walk (fast_backtrace).
#include "unwind/fast_unwind.h"

#if defined(__x86_64__) && defined(__linux__)

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

#include "recorder/cache_hints.h"
#include "unwind/eh_frame_rules.h"

namespace gmt::unwind {
namespace {

using namespace rules;

// ---- the table of rules by code address ------------------------------------------------------------------

// Open addressing, never evicted: an address's rule is written once, before its key is published, and
// never changes. Keys carry the generation (bumped by forget_unwind_rules) in their top 16 bits: user-space
// code addresses on x86-64 fit in 48. A full table only means more reads of .eh_frame.
constexpr unsigned kTableBits = 14;  // 16,384 slots, 256 KiB
constexpr uint64_t kBusy = ~uint64_t{0};
constexpr int kMaxProbes = 16;

struct Slot {
  std::atomic<uint64_t> key{0};
  std::atomic<Rule> rule{0};
};
Slot g_slots[1u << kTableBits];
std::atomic<uint32_t> g_generation{1};  // 0 would make a key of address 0 look empty

Rule table_rule_for(uintptr_t pc, uint64_t generation) {
  const uint64_t key = (static_cast<uint64_t>(pc) & ((uint64_t{1} << 48) - 1)) | (generation << 48);
  size_t index = (key * 0x9e3779b97f4a7c15ull) >> (64 - kTableBits);
  for (int probe = 0; probe < kMaxProbes; ++probe, index = (index + 1) & ((1u << kTableBits) - 1)) {
    Slot& slot = g_slots[index];
    uint64_t seen = slot.key.load(std::memory_order_acquire);
    if (seen == key) return slot.rule.load(std::memory_order_relaxed);
    if (seen != 0) continue;  // another address, or one being written
    Rule rule = rule_from_eh_frame(pc);
    uint64_t expected = 0;
    if (slot.key.compare_exchange_strong(expected, kBusy, std::memory_order_relaxed)) {
      slot.rule.store(rule, std::memory_order_relaxed);
      slot.key.store(key, std::memory_order_release);
    }
    return rule;
  }
  return rule_from_eh_frame(pc);
}

// ---- the walk ----------------------------------------------------------------------------------------------

// Per thread: its stack's bounds (every read of the walk stays between the current stack pointer and the
// top), and the addresses and rules of its previous walk, by depth. A thread allocates from the same few
// places, so the frame at depth i usually has the same address as last time: its rule is then at hand
// without hashing, and the walk's chain of dependent loads is the stack itself, as in a frame-pointer walk.
constexpr int kMemoFrames = 80;

// Walks kept, so that a later one can be answered without walking (stored_walk_matches). A walk is a function of
// where it starts (this function's own pc, the stack pointer, and rbp while no frame has reloaded it), the rules
// (fixed within a generation) and the stack words it reads. When a walk starts at the stack pointer a stored one
// started at and every word that one read still holds the value it read, the walk would read the same words in
// the same order and return the same frames: checking that takes independent loads, where walking takes a chain
// of dependent ones, frame by frame.
//
// Only the words the answer depends on are kept: every return address and realigned CFA, and a saved rbp only
// when a later rule uses rbp before another frame reloads it. Code without frame pointers saves the caller's
// rbp as an ordinary register, which may hold a loop counter: checking those words would make every walk from
// a loop miss.
//
// What a check reads is kept small and together, because a step's few hundred places are each checked once per
// step, from far caches: each word's place as its offset from the entry stack pointer (2 bytes), and one hash of
// the values they held (value_hash, words_hash below) instead of the values. A changed word always changes the
// hash (each of its lanes is a chain of bijections, and lanes are combined so that one differing lane shows); a
// stored answer is wrongly taken only if several words changed at once in a way that cancels out, with
// probability about 2^-64, which GMT_UNWIND=check would count (its walks compare against libunwind's). The
// frames (result) are read only when the caller needs them: the stack memo, beside this store, usually has the
// stack's id already.
//
// A walk that crossed the cut (set_walk_cut: CPython's eval loop) also keeps how many of its words lie at or
// below the first frame inside the cut, and their hash: asked for StoredAnswer::kToTheCut, it answers for the
// frames up to the cut from those words alone. In a Python program the native frames beyond the first eval loop
// (more eval loops, the interpreter's calls, main) are often half of a deep stack, and the thread's Python frame
// chain, which the recorder reads anyway, stands for them (recorder/stacks.cpp, the stack memo).
//
// Many walks are kept per thread, not only the last: a training step allocates from a few hundred places, each
// step the same ones at the same stack depths, so that after the first step nearly every walk is one kept.
// Set-associative by the starting stack pointer, eight ways, the least recently used one overwritten; a slot's
// version changes whenever it is overwritten, so that a (slot, version) pair names one stored answer for as long as
// it exists (WalkIdentity, for the stack memo that the recorder keeps beside it: recorder/stacks.cpp).
//
// Why eight ways and the least recently used: which places share a set depends on where the process's stack lies
// (its address is randomized), and places that allocate at one stack depth all share one. With four ways, each
// overwritten in turn, one H100 process of a PyTorch step in four walked 7% of its stacks afresh (2026-12-07,
// 513db89: 14,514 of 195,136 stacks, the recorder's own time 682 ns per block event against 538 in the next
// process): a set with five hot walks overwrote each before its next use. A CPU stand-in of the step walked 84 to 326
// stacks afresh of 28,032, five processes of six above the 84 its places need.
constexpr int kMaxReplayReads = 3 * kMemoFrames;  // reads while walking
constexpr int kMaxKeptReads = 160;                // reads a stored walk's answer depends on
constexpr int kWalkSets = 1 << kWalkSetBits;      // of kWalkWays: kStoredWalks walks per thread, 1 KiB each
static_assert(kWalkSets * kWalkWays == kStoredWalks);
static_assert((kWalkWays & (kWalkWays - 1)) == 0, "ways are taken modulo kWalkWays");

struct alignas(64) StoredWalk {
  // What every check reads, in its first line. Its stack pointer is the slot's ThreadWalk::slot_sp, compared before
  // the walk is read at all.
  uint32_t version;    // 0: empty
  bool uses_entry_bp;  // some frame's rule read rbp before any frame reloaded it
  int max_frames, frames, reads;
  int cut_frames;  // the frames up to and with the first one inside the cut; 0: the walk did not cross it
  int cut_reads;   // the kept reads those frames depend on: the first cut_reads of read_word
  uintptr_t entry_bp;
  uint64_t value_hash;  // words_hash of the words read, as they were
  uint64_t cut_hash;    // words_hash of the first cut_reads of them
  // Each word's address minus the walk's stack pointer, in words: two bytes, so that a check's offsets take 5 cache
  // lines, not 10 (the check runs between the app's own work, which evicts them; a walk whose words lie further is not
  // kept).
  uint16_t read_word[kMaxKeptReads];
  void* result[kMemoFrames];  // read only when the caller wants the frames
};
static_assert(offsetof(StoredWalk, read_word) <= 64, "what every check reads is its first line");
static_assert(sizeof(StoredWalk) == 1024, "16 cache lines: the offsets take 5, the frames 10");

// The hash of `count` stack words, word i read by `word(i)`: four lanes of xor-and-multiply chains (the loads and
// the lanes are independent of each other), each step a bijection of the lane's state, combined at the end.
template <typename Word>
__attribute__((always_inline, no_sanitize("address"))) inline uint64_t words_hash(int count, Word word) {
  constexpr uint64_t kMul = 0x9e3779b97f4a7c15ull;
  uint64_t a = 0x2545f4914f6cdd1dull, b = 0xc2b2ae3d27d4eb4full, c = 0x165667b19e3779f9ull,
           d = 0x27d4eb2f165667c5ull ^ static_cast<uint64_t>(count);
  int i = 0;
  for (; i + 4 <= count; i += 4) {
    a = (a ^ word(i)) * kMul;
    b = (b ^ word(i + 1)) * kMul;
    c = (c ^ word(i + 2)) * kMul;
    d = (d ^ word(i + 3)) * kMul;
  }
  if (i < count) a = (a ^ word(i)) * kMul;
  if (i + 1 < count) b = (b ^ word(i + 1)) * kMul;
  if (i + 2 < count) c = (c ^ word(i + 2)) * kMul;
  // Rotations by distinct amounts: one lane differing makes the result differ.
  return a ^ ((b << 16) | (b >> 48)) ^ ((c << 32) | (c >> 32)) ^ ((d << 48) | (d >> 16));
}

// The walk in progress: every word read, and whether the answer depends on it.
struct WalkScratch {
  bool uses_entry_bp = false;
  uintptr_t entry_sp = 0, entry_bp = 0;
  const uintptr_t* read_at[kMaxReplayReads];
  uintptr_t read_value[kMaxReplayReads];
  bool read_needed[kMaxReplayReads];
};

thread_local uint64_t t_replayed_walks __attribute__((tls_model("initial-exec"))) = 0;
thread_local uint64_t t_cut_answers __attribute__((tls_model("initial-exec"))) = 0;
thread_local uint64_t t_word_checks __attribute__((tls_model("initial-exec"))) = 0;
thread_local uint64_t t_evictions __attribute__((tls_model("initial-exec"))) = 0;

// The cut (set_walk_cut); begin 0: none. Set once, end before begin.
std::atomic<uintptr_t> g_cut_begin{0};
std::atomic<uintptr_t> g_cut_end{0};

struct ThreadWalk {
  uintptr_t stack_low = 0, stack_high = 0;
  uint64_t generation = 0;   // of the memo below; 0: empty
  int previous_frames = -1;  // what the previous walk returned (-1: it gave up; its memo is partly new)
  bool walking = false;      // a walk is in progress (a signal handler's walk nested in it is left to libunwind)
  uintptr_t memo_pc[kMemoFrames] = {};
  Rule memo_rule[kMemoFrames] = {};
  WalkScratch scratch;
  // kStoredWalks, not zeroed: a slot is read only once its stack pointer below says it holds a walk, so that the
  // store's pages are touched only as far as walks are kept.
  StoredWalk* stored = nullptr;
  // Each slot's stored walk's stack pointer (0: the slot holds none), a set's eight in one cache line: a walk
  // compares its stack pointer with these before it reads any stored walk.
  alignas(64) uintptr_t slot_sp[kStoredWalks] = {};
  // When each slot last answered or was kept, in this thread's walks (ThreadWalk::clock): the set's least recently
  // used slot is the one overwritten.
  uint32_t slot_used[kStoredWalks] = {};
  uint32_t clock = 0;
  uint32_t next_version = 1;
  uint8_t last_answer[kWalkSets] = {};  // the way that answered last in each set
  uint32_t previous_slot = 0;           // the stored walk that answered the previous walk (WalkIdentity::slot), 0: none
  uint32_t previous_version = 0;
  // The order of a thread's walks repeats (a training step allocates from the same places in the same order every
  // step): for each stored walk, the slot that answered or kept the walk after it (slot + 1; 0: none yet), whose
  // way is checked first when it lies in the set of the walk's stack pointer. This serves places that alternate at
  // one stack pointer, for which the way that answered last is the other place's.
  uint16_t successor[kStoredWalks] = {};
};
static_assert(kStoredWalks < UINT16_MAX);

thread_local ThreadWalk* t_walk __attribute__((tls_model("initial-exec"))) = nullptr;
thread_local bool t_walk_unusable __attribute__((tls_model("initial-exec"))) = false;
pthread_key_t g_walk_key;
bool g_walk_key_made = false;

void make_walk_key() {
  g_walk_key_made = pthread_key_create(&g_walk_key, [](void* walk) {
                      t_walk = nullptr;
                      std::free(static_cast<ThreadWalk*>(walk)->stored);
                      delete static_cast<ThreadWalk*>(walk);
                    }) == 0;
}

// Null when this thread's stack bounds cannot be had: its walks are left to libunwind.
ThreadWalk* this_thread_walk() {
  if (t_walk || t_walk_unusable) return t_walk;
  t_walk_unusable = true;  // until proven otherwise; asked once
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, make_walk_key);
  if (!g_walk_key_made) return nullptr;
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return nullptr;
  void* base = nullptr;
  size_t size = 0;
  bool known = pthread_attr_getstack(&attr, &base, &size) == 0 && size != 0;
  pthread_attr_destroy(&attr);
  if (!known) return nullptr;
  auto* walk = new (std::nothrow) ThreadWalk;
  if (!walk) return nullptr;
  walk->stored = static_cast<StoredWalk*>(std::aligned_alloc(alignof(StoredWalk), kStoredWalks * sizeof(StoredWalk)));
  if (!walk->stored || pthread_setspecific(g_walk_key, walk) != 0) {
    std::free(walk->stored);
    delete walk;
    return nullptr;
  }
  walk->stack_low = reinterpret_cast<uintptr_t>(base);
  walk->stack_high = walk->stack_low + size;
  t_walk_unusable = false;
  return t_walk = walk;
}

// Whether a stored walk's answer is this walk's too (see StoredWalk): the words it read, at the same places from
// the same stack pointer, hash as they did; `to_the_cut`: only the words of its frames up to the cut. Reads only
// words the stored walk read, which lay between its stack pointer (the same as now) and the top of the stack. Called
// only for a slot whose ThreadWalk::slot_sp is `sp`: one that holds a walk from this stack pointer.
__attribute__((no_sanitize("address"))) bool stored_walk_matches(const StoredWalk& stored, uintptr_t sp, uintptr_t bp,
                                                                 int max_frames, bool to_the_cut) {
  if (stored.max_frames != max_frames) return false;
  if (stored.uses_entry_bp && stored.entry_bp != bp) return false;
  ++t_word_checks;
  const uint16_t* words = stored.read_word;
  const uint64_t now = words_hash(
      to_the_cut ? stored.cut_reads : stored.reads, [ sp, words ](int i) __attribute__((no_sanitize("address"))) {
        return *reinterpret_cast<const uintptr_t*>(sp + uintptr_t{words[i]} * sizeof(uintptr_t));
      });
  return now == (to_the_cut ? stored.cut_hash : stored.value_hash);
}

// Where a fresh walk crossed the cut: its frames up to and with the first one inside it, and the reads made
// until then (cut_frames 0: it did not cross it, or was not asked to look).
struct CutPoint {
  int cut_frames = 0;
  int reads = 0;
};

// A fresh walk's answer, kept for the walks to come (StoredWalk) in the set of its stack pointer, over that set's
// oldest way, with the reads it depended on; too many such reads and it is not kept. Names it in `identity`.
GMT_HOT __attribute__((noinline)) void keep_walk(ThreadWalk& walk, size_t set, int max_frames, void* const* frames,
                                                 int result, int reads, CutPoint cut, WalkIdentity* identity) {
  const WalkScratch& scratch = walk.scratch;
  int kept = 0;
  for (int i = 0; i < reads; ++i) kept += scratch.read_needed[i] ? 1 : 0;
  if (kept > kMaxKeptReads) return;
  // An empty way, else the one that answered least recently. Overwriting in turn instead lost every walk of a set
  // that held one hot walk more than its ways, each overwritten before its next use; this way a set that holds
  // more only loses the walks that come least often, and a walk kept once (a warm-up's) ages out first.
  uint32_t slot = static_cast<uint32_t>(set * kWalkWays);
  uint32_t oldest_age = 0;
  for (uint32_t way_slot = slot; way_slot < (set + 1) * kWalkWays; ++way_slot) {
    if (walk.slot_sp[way_slot] == 0) {
      slot = way_slot;
      oldest_age = UINT32_MAX;
      break;
    }
    const uint32_t age = walk.clock - walk.slot_used[way_slot];  // modulo 2^32: walks since it answered
    if (age > oldest_age) {
      oldest_age = age;
      slot = way_slot;
    }
  }
  if (oldest_age != UINT32_MAX) ++t_evictions;
  walk.slot_sp[slot] = 0;  // until it holds this walk
  walk.slot_used[slot] = walk.clock;
  StoredWalk& stored = walk.stored[slot];
  stored.uses_entry_bp = scratch.uses_entry_bp;
  stored.entry_bp = scratch.entry_bp;
  stored.max_frames = max_frames;
  stored.frames = result;
  std::memcpy(stored.result, frames, sizeof(void*) * static_cast<size_t>(result));
  kept = 0;
  int kept_to_the_cut = -1;
  uintptr_t kept_values[kMaxKeptReads];
  for (int i = 0; i < reads; ++i) {
    if (i == cut.reads) kept_to_the_cut = kept;  // the reads before the cut's: those of the frames up to it
    if (!scratch.read_needed[i]) continue;
    const uintptr_t offset = reinterpret_cast<uintptr_t>(scratch.read_at[i]) - scratch.entry_sp;
    // Stack words are 8-byte aligned on x86-64; a word further than 512 KiB from the walk's start (a frame with a
    // large array on the stack) or one not aligned is not expressible: the walk is not kept.
    if (offset % sizeof(uintptr_t) != 0 || offset / sizeof(uintptr_t) > UINT16_MAX) {
      stored.version = 0;  // the slot stays empty (slot_sp 0)
      return;
    }
    stored.read_word[kept] = static_cast<uint16_t>(offset / sizeof(uintptr_t));
    kept_values[kept++] = scratch.read_value[i];
  }
  stored.reads = kept;
  stored.value_hash = words_hash(kept, [&kept_values](int i) { return kept_values[i]; });
  // A read after the cut may have made an earlier one needed (a saved rbp that a later rule uses): it is checked
  // to the cut too, which can only make that check stricter. A walk that ends at the cut is kept whole.
  const bool crossed = cut.cut_frames != 0 && cut.cut_frames < result && kept_to_the_cut >= 0;
  stored.cut_frames = crossed ? cut.cut_frames : 0;
  stored.cut_reads = crossed ? kept_to_the_cut : kept;
  stored.cut_hash = words_hash(stored.cut_reads, [&kept_values](int i) { return kept_values[i]; });
  stored.version = walk.next_version++;
  if (walk.next_version == 0) walk.next_version = 1;  // 0 means empty
  walk.slot_sp[slot] = scratch.entry_sp;
  if (identity) *identity = WalkIdentity{slot + 1, stored.version, crossed, false};
  walk.previous_slot = slot + 1;
  walk.previous_version = stored.version;
}

size_t walk_set_of(uintptr_t sp) { return ((sp >> 3) * 0x9e3779b97f4a7c15ull) >> (64 - kWalkSetBits); }

}  // namespace

// Reads raw stack words of other frames, as libunwind does: not instrumented by ASan (a return-address slot is
// never poisoned, but the reads say nothing about the app's memory safety).
GMT_HOT __attribute__((noinline, no_sanitize("address"))) int fast_backtrace(void** frames, int max_frames,
                                                                             bool* same_as_previous,
                                                                             WalkIdentity* identity,
                                                                             void* const** stored_answer,
                                                                             StoredAnswer answer) {
  if (same_as_previous) *same_as_previous = false;
  if (stored_answer) *stored_answer = nullptr;
  if (identity) *identity = WalkIdentity{};
  const uint64_t generation = g_generation.load(std::memory_order_acquire);
  if (generation >= 0xffff) return -1;  // the generation would wrap into old keys: libunwind from now on
  ThreadWalk* walk = this_thread_walk();
  if (!walk || walk->walking) return -1;
  uintptr_t pc, sp, bp;
  // This function's own state at the next instruction: the walk starts here, with the rule of this exact
  // address; its own frame is not reported (unw_backtrace does not report its own either).
  asm volatile("leaq 0(%%rip), %0\n\tmovq %%rsp, %1\n\tmovq %%rbp, %2" : "=r"(pc), "=r"(sp), "=r"(bp));
  if (sp < walk->stack_low || sp >= walk->stack_high) return -1;  // not on the thread's own stack
  if (walk->generation != generation) {
    std::memset(walk->memo_pc, 0, sizeof(walk->memo_pc));
    walk->generation = generation;
    walk->previous_frames = -1;
    walk->previous_slot = 0;
    std::memset(walk->slot_sp, 0, sizeof(walk->slot_sp));
  }
  walk->walking = true;  // from here to every return
  const size_t set = walk_set_of(sp);
  const bool to_the_cut = answer == StoredAnswer::kToTheCut;
  // Which way to check first: the one that followed the previous walk's last time (ThreadWalk::successor), else
  // the one that answered last in this set. A place that allocates in a loop, or in an order that repeats, is then
  // answered by one check where other places (or the same place reached from elsewhere: its outer frames differ)
  // share its stack pointer.
  const uint32_t predecessor = walk->previous_slot;  // whose successor this walk's slot becomes
  const uint32_t predicted = predecessor != 0 ? walk->successor[predecessor - 1] : 0;
  auto follows = [&](uint32_t slot_number) {  // this walk's slot, answered or kept (slot + 1)
    if (predecessor != 0 && slot_number != 0) walk->successor[predecessor - 1] = static_cast<uint16_t>(slot_number);
  };
  const int last_way = walk->last_answer[set];
  const int first_way =
      predicted != 0 && (predicted - 1) / kWalkWays == set ? static_cast<int>((predicted - 1) % kWalkWays) : last_way;
  ++walk->clock;
  const uintptr_t* set_sp = &walk->slot_sp[set * kWalkWays];
  for (int k = 0; k < kWalkWays; ++k) {
    const int way = (first_way + k) & (kWalkWays - 1);
    if (set_sp[way] != sp) continue;
    const auto slot = static_cast<uint32_t>(set * kWalkWays + static_cast<size_t>(way));
    const StoredWalk& stored = walk->stored[slot];
    const bool cut = to_the_cut && stored.cut_frames != 0;
    if (!stored_walk_matches(stored, sp, bp, max_frames, cut)) continue;
    const int count = cut ? stored.cut_frames : stored.frames;
    if (stored_answer) {
      *stored_answer = stored.result;
    } else {
      std::memcpy(frames, stored.result, sizeof(void*) * static_cast<size_t>(count));
    }
    // An answer to the cut says nothing of the frames beyond it: neither it nor the next answer is "the same".
    if (same_as_previous) {
      *same_as_previous = !cut && walk->previous_slot == slot + 1 && walk->previous_version == stored.version;
    }
    if (identity) *identity = WalkIdentity{slot + 1, stored.version, stored.cut_frames != 0, cut};
    walk->previous_frames = cut ? -1 : stored.frames;
    walk->previous_slot = cut ? 0 : slot + 1;
    walk->previous_version = stored.version;
    walk->last_answer[set] = static_cast<uint8_t>(way);
    walk->slot_used[slot] = walk->clock;
    follows(slot + 1);
    walk->walking = false;
    ++t_replayed_walks;
    t_cut_answers += cut ? 1 : 0;
    return count;
  }
  WalkScratch& scratch = walk->scratch;
  scratch.entry_sp = sp;
  scratch.entry_bp = bp;
  scratch.uses_entry_bp = false;
  int reads = 0;
  int bp_read = -1;  // the read that rbp's current value came from; -1: rbp is still the entry value
  // Every stack word the walk reads goes through here (the loads stay in this function: it is the one not
  // instrumented by ASan).
  auto note_read = [&](uintptr_t at, uintptr_t value, bool needed) {
    if (reads < kMaxReplayReads) {
      scratch.read_at[reads] = reinterpret_cast<const uintptr_t*>(at);
      scratch.read_value[reads] = value;
      scratch.read_needed[reads] = needed;
    }
    ++reads;
  };
  bool all_in_memo = true;  // every frame's address equal to the previous walk's at the same depth
  // Where this walk first entered the cut, if one is set: kept with the walk whatever this request, so that a
  // later one may be answered to the cut.
  const uintptr_t cut_begin = g_cut_begin.load(std::memory_order_acquire);
  const uintptr_t cut_span = cut_begin != 0 ? g_cut_end.load(std::memory_order_relaxed) - cut_begin : 0;
  CutPoint cut;
  auto finish = [&](int result) __attribute__((always_inline)) {
    if (same_as_previous) *same_as_previous = result >= 0 && all_in_memo && result == walk->previous_frames;
    walk->previous_frames = result;
    walk->previous_slot = 0;
    if (result >= 0 && result <= kMemoFrames && reads <= kMaxReplayReads && answer != StoredAnswer::kWholeUnkept) {
      keep_walk(*walk, set, max_frames, frames, result, reads, cut, identity);
      follows(walk->previous_slot);  // set by keep_walk where it kept the walk
    }
    walk->walking = false;
    return result;
  };
  const uintptr_t ceiling = walk->stack_high;
  // Whether [address, address + 8) lies between the current frame's stack pointer and the top of the stack.
  auto readable = [floor = sp, span = ceiling - 8 - sp](uintptr_t address) { return address - floor <= span; };
  uintptr_t lookup = pc;  // an exact address first, return addresses minus one after it
  for (int depth = 0, n = 0;; ++depth) {
    Rule rule;
    if (depth < kMemoFrames && walk->memo_pc[depth] == lookup) {
      rule = walk->memo_rule[depth];
    } else {
      all_in_memo = false;
      rule = table_rule_for(lookup, generation);
      if (depth < kMemoFrames) {
        walk->memo_pc[depth] = lookup;
        walk->memo_rule[depth] = rule;
      }
    }
    uintptr_t cfa;
    const CfaKind kind = cfa_kind_of(rule);
    const BpKind bp_kind = bp_kind_of(rule);
    if (kind == CfaKind::BpPlus || kind == CfaKind::DerefBp || bp_kind == BpKind::AtBp) {  // rbp's value used
      if (bp_read < 0)
        scratch.uses_entry_bp = true;  // past the cut too: the check to the cut then compares rbp, stricter
      else if (bp_read < kMaxReplayReads)
        scratch.read_needed[bp_read] = true;
    }
    if (kind == CfaKind::SpPlus) {
      cfa = sp + cfa_offset_of(rule);
    } else if (kind == CfaKind::BpPlus) {
      cfa = bp + cfa_offset_of(rule);
    } else if (kind == CfaKind::DerefBp) {
      uintptr_t at = bp + cfa_offset_of(rule);
      if (!readable(at)) return finish(-1);
      cfa = *reinterpret_cast<const uintptr_t*>(at);
      note_read(at, cfa, true);
    } else if (kind == CfaKind::EndOfStack) {
      return finish(n);
    } else {
      return finish(-1);
    }
    // The caller's frame is above this one, and its return address (CFA - 8) inside the stack.
    if (cfa - 8 - sp > ceiling - 8 - sp) return finish(-1);
    if (bp_kind != BpKind::Unchanged) {
      uintptr_t at = (bp_kind == BpKind::AtCfa ? cfa : bp) + bp_offset_of(rule);
      if (!readable(at)) return finish(-1);
      bp = *reinterpret_cast<const uintptr_t*>(at);
      bp_read = reads;
      note_read(at, bp, false);  // needed only if a later rule uses it
    }
    pc = *reinterpret_cast<const uintptr_t*>(cfa - 8);
    note_read(cfa - 8, pc, true);
    sp = cfa;
    if (pc == 0) return finish(n);  // a zeroed return address ends the chain, as it does for libunwind
    if (n == max_frames) return finish(n);
    frames[n++] = reinterpret_cast<void*>(pc);
    lookup = pc - 1;
    if (cut.cut_frames == 0 && lookup - cut_begin < cut_span) cut = CutPoint{n, reads};
  }
}

void forget_unwind_rules() { g_generation.fetch_add(1, std::memory_order_acq_rel); }

void set_walk_cut(uintptr_t begin, uintptr_t end) {
  if (begin == 0 || end <= begin) return;
  g_cut_end.store(end, std::memory_order_relaxed);
  g_cut_begin.store(begin, std::memory_order_release);
}

uint64_t fast_backtrace_replays_in_this_thread() { return t_replayed_walks; }
uint64_t fast_backtrace_cut_answers_in_this_thread() { return t_cut_answers; }
uint64_t fast_backtrace_word_checks_in_this_thread() { return t_word_checks; }
uint64_t fast_backtrace_evictions_in_this_thread() { return t_evictions; }

}  // namespace gmt::unwind

#else  // not x86-64 Linux: libunwind only

namespace gmt::unwind {
int fast_backtrace(void**, int, bool*, WalkIdentity*, void* const**, StoredAnswer) { return -1; }
void forget_unwind_rules() {}
void set_walk_cut(uintptr_t, uintptr_t) {}
uint64_t fast_backtrace_replays_in_this_thread() { return 0; }
uint64_t fast_backtrace_cut_answers_in_this_thread() { return 0; }
uint64_t fast_backtrace_word_checks_in_this_thread() { return 0; }
uint64_t fast_backtrace_evictions_in_this_thread() { return 0; }
}  // namespace gmt::unwind

#endif
