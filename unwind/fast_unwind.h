// A stack walk for the hot path that costs a hash lookup and two loads per frame, for x86-64 code with
// DWARF call-frame information (.eh_frame, which gcc and clang emit for every function by default).
//
// Why: libunwind's unw_backtrace spends ~85 instructions per frame even on its cached path, and the walk was
// 55-60% of what the profiler adds to an allocation (docs/benchmarks.md, "Per-event cost"). Almost every
// frame of real code follows one of a few rules: the caller's stack pointer (the CFA) is the stack pointer
// or the frame pointer plus a constant, the return address sits just below it, and the frame pointer is
// either untouched or saved at a constant offset from the CFA. This walker keeps that rule per return
// address in a global table, filled from the module's .eh_frame the first time an address is seen.
//
// Exact or nothing: wherever a frame needs more than those rules (signal frames, DWARF expressions other
// than gcc's stack realignment, code without unwind information, a stack outside the thread's own), the
// walk gives up and the caller uses libunwind for the whole stack. tests/unwind/fast_unwind_test.cpp and the
// `GMT_UNWIND=check` mode (both walks on every stack, mismatches counted in the trace) check that the two
// agree frame for frame.
#pragma once

#include <cstdint>

namespace gmt::unwind {

// How much of a stack a kept walk answers for (fast_backtrace's `answer`).
enum class StoredAnswer : uint8_t {
  // Every frame: a kept walk answers only when every stack word its frames depend on still holds its value.
  kWhole,
  // The frames up to the first return address inside the cut (set_walk_cut: CPython's eval loop): a kept walk
  // answers when the words those frames depend on are unchanged, and says so (WalkIdentity::cut). The caller
  // knows the rest by other means (the recorder's stack memo keys it on the thread's Python frame chain), or
  // asks again with kWholeUnkept. A fresh walk that crossed the cut is kept so that both can answer it.
  kToTheCut,
  // As kWhole, but a fresh walk is not kept: the whole stack after an answer to the cut that was not enough. The
  // walk that answered to the cut stays (keeping this one could evict it, and with it the stacks the memo knows
  // under it).
  kWholeUnkept,
};

// Fills `frames` with up to `max_frames` return addresses, innermost first, starting with the return address
// into this function's caller: the same list unw_backtrace gives when called from that place. Returns how
// many, or -1 when this walker cannot do this stack exactly: the caller must take it with libunwind instead.
// Async-signal-unsafe only on the first sight of a return address (it then reads the loader's module list).
// `same_as_previous` (optional): set to whether this walk found exactly the return addresses of this thread's
// previous walk, frame for frame (a thread allocating in a loop walks the same stack again and again).
// `identity` (optional): which of the walks this thread keeps gave the answer, or keeps it from now on (see
// WalkIdentity); {0, 0} when none does. `stored` (optional): when a kept walk gives the answer, set to its frames
// and `frames` is left unfilled (the caller copies them if it needs them, before this thread walks again).
struct WalkIdentity;
int fast_backtrace(void** frames, int max_frames, bool* same_as_previous = nullptr, WalkIdentity* identity = nullptr,
                   void* const** stored = nullptr, StoredAnswer answer = StoredAnswer::kWhole);

// The walks a thread keeps (fast_unwind.cpp): the answers of up to this many stacks are found again without
// walking, by checking the stack words they depend on.
#ifndef GMT_WALK_SET_BITS
#define GMT_WALK_SET_BITS 6  // benchmarks may build with more (-DGMT_WALK_SET_BITS=8)
#endif
inline constexpr int kWalkSetBits = GMT_WALK_SET_BITS;
// Eight ways: the places a step allocates from share sets by their stack pointers' hash, and several places often
// share one stack pointer; with four ways a process whose stack addresses made five hot walks share a set walked
// them afresh every step (fast_unwind.cpp, keep_walk).
inline constexpr int kWalkWays = 8;
inline constexpr int kStoredWalks = (1 << kWalkSetBits) * kWalkWays;

// One stored walk's answer: slot 1..kStoredWalks of the calling thread's store, and the version that slot had.
// Two walks of one thread with the same identity returned the same frames (the stack words they depend on held
// the same values); a slot overwritten by another walk has another version. {0, 0}: no stored walk.
struct WalkIdentity {
  uint32_t slot = 0;
  uint32_t version = 0;
  // The walk was kept to the cut (StoredAnswer::kToTheCut): with kToTheCut this identity is answered again whenever
  // the frames up to the cut are the same, whatever lies beyond it.
  bool cut = false;
  // This answer's frames end at the cut (their last one inside it) and the stack goes on beyond it.
  bool frames_end_at_cut = false;
};

// The code range where StoredAnswer::kToTheCut may end an answer: CPython's eval loop (unwind/python_frames.cpp
// sets it once it has found the interpreter; empty before and without one). Its frames and the native frames
// beyond them are what the Python frame chain stands for.
void set_walk_cut(uintptr_t begin, uintptr_t end);

// Whether the walker can run on this platform at all (x86-64 Linux); if not, fast_backtrace returns -1.
constexpr bool fast_backtrace_supported() {
#if defined(__x86_64__) && defined(__linux__)
  return true;
#else
  return false;
#endif
}

// Forget every cached rule: code may have been unmapped (dlclose) and other code mapped at its addresses.
// Cheap (one atomic increment); walks in progress finish with the rules they read.
void forget_unwind_rules();

// How many of this thread's walks were answered from the previous walk without walking (for tests).
uint64_t fast_backtrace_replays_in_this_thread();
// How many of those answers ended at the cut (WalkIdentity::frames_end_at_cut).
uint64_t fast_backtrace_cut_answers_in_this_thread();
// How many stored walks this thread checked word by word (a stored walk from the same stack pointer, whether it
// then matched or not): one per answered walk when the stack pointer names one place; more where several places
// allocate at the same depth and share a set.
uint64_t fast_backtrace_word_checks_in_this_thread();
// How many kept walks this thread overwrote with another while they were still valid (its set was full): each costs
// a fresh walk when its place comes again. Near zero where the store holds a step's places.
uint64_t fast_backtrace_evictions_in_this_thread();

}  // namespace gmt::unwind
