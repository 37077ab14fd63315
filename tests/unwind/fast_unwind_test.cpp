// unwind/fast_unwind.h against libunwind's unw_backtrace: the same return addresses, frame for frame, for
// every shape of frame the walker claims to handle, and a refusal (-1) where it does not. Both walks are made
// through one call site (walk_from_here), so their first frames are the same return address.
#include <gtest/gtest.h>
#include <libunwind.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "unwind/fast_unwind.h"

namespace {

using gmt::unwind::fast_backtrace;

constexpr int kFrames = 72;
using Walker = int (*)(void**, int);

int fast_walk(void** frames, int max_frames) { return fast_backtrace(frames, max_frames); }

__attribute__((noinline)) int walk_from_here(Walker walker, void** frames) {
  int n = walker(frames, kFrames);
  asm volatile("" ::: "memory");  // keeps the call from becoming a tail call
  return n;
}

struct Comparison {
  std::vector<void*> fast, slow;
  bool fast_refused = false;
};

__attribute__((noinline)) Comparison walk_both() {
  void* frames[2][kFrames];
  const Walker walkers[2] = {fast_walk, unw_backtrace};
  int found[2];
  // Poisoned first: the array sits where the previous call's did, and a walk that wrote nothing must not pass
  // for one that found the previous walk's frames.
  std::fill(&frames[0][0], &frames[0][0] + 2 * kFrames, reinterpret_cast<void*>(0xbad));
  // One call site for both (the index is opaque to the compiler, so the loop is not unrolled into two), so
  // that every return address above it is the same.
  for (int i = 0; i < 2; ++i) {
    asm volatile("" : "+r"(i));
    found[i] = walk_from_here(walkers[i], frames[i]);
  }
  void** fast = frames[0];
  void** slow = frames[1];
  int n_fast = found[0], n_slow = found[1];
  Comparison c;
  c.fast_refused = n_fast < 0;
  if (n_fast > 0) c.fast.assign(fast, fast + n_fast);
  if (n_slow > 0) c.slow.assign(slow, slow + n_slow);
  asm volatile("" ::: "memory");
  return c;
}

// Each shape below calls `leaf` at its bottom; the test checks what leaf saw. A shape recurses into itself,
// or, in a mixed chain, into the next shape (t_mixed).
thread_local std::vector<Comparison>* t_seen = nullptr;
thread_local bool t_mixed = false;
__attribute__((noinline)) void leaf() { t_seen->push_back(walk_both()); }
int mixed(int depth);

// Plain recursion, no frame pointer (the default at -O2), frames of different sizes.
__attribute__((noinline)) int recurse(int depth, int salt) {
  volatile char pad[64];
  pad[depth % 64] = static_cast<char>(salt);
  if (depth == 0)
    leaf();
  else if (t_mixed)
    mixed(depth - 1);
  else
    recurse(depth - 1, salt + pad[depth % 64]);
  return pad[0];
}

// Frame-pointer code: CFA = rbp + 16 after the prologue.
__attribute__((noinline, optimize("no-omit-frame-pointer"))) int with_frame_pointer(int depth) {
  volatile int keep = depth;
  if (depth == 0)
    leaf();
  else if (t_mixed)
    mixed(depth - 1);
  else
    with_frame_pointer(depth - 1);
  return keep;
}

// A variable-sized frame: gcc must keep rbp as the frame pointer (CFA from rbp), whatever -fomit says.
__attribute__((noinline)) int with_alloca(int depth, size_t bytes) {
  auto* buffer = static_cast<volatile char*>(__builtin_alloca(bytes));
  buffer[0] = static_cast<char>(depth);
  buffer[bytes - 1] = 1;
  if (depth == 0)
    leaf();
  else if (t_mixed)
    mixed(depth - 1);
  else
    with_alloca(depth - 1, bytes * 3 + 8);
  return buffer[0] + buffer[bytes - 1];
}

// Over-aligned locals: the stack is realigned (and $-64, %rsp), the CFA comes from rbp.
__attribute__((noinline)) int with_aligned_local(int depth) {
  alignas(64) volatile char block[256];
  block[depth] = 1;
  if (depth == 0)
    leaf();
  else if (t_mixed)
    mixed(depth - 1);
  else
    with_aligned_local(depth - 1);
  return block[depth];
}

// gcc's dynamic realignment with a variable-sized frame (DRAP): the CFA is a DWARF expression (*(rbp - 8)),
// and rbp is saved at an expression address (rbp + 0).
__attribute__((noinline)) int with_realigned_entry(int depth) {
  alignas(64) volatile char block[96];
  auto* extra = static_cast<volatile char*>(__builtin_alloca(16 + depth));
  block[depth] = 2;
  extra[0] = 1;
  if (depth == 0)
    leaf();
  else if (t_mixed)
    mixed(depth - 1);
  else
    with_realigned_entry(depth - 1);
  return block[depth] + extra[0];
}

// Frames of libc in the middle: qsort calls back into us.
int compare_calling_leaf(const void* a, const void* b) {
  static thread_local bool done = false;
  if (!done) {
    done = true;
    leaf();
  }
  return *static_cast<const int*>(a) - *static_cast<const int*>(b);
}
__attribute__((noinline)) void through_qsort() {
  int values[] = {5, 3, 9, 1};
  qsort(values, 4, sizeof(int), compare_calling_leaf);
}

// A mix of every shape, in a deep chain: each shape's frame sits on the stack under the next one's.
__attribute__((noinline)) int mixed(int depth) {
  int result = 0;
  switch (depth % 5) {
    case 0: result = recurse(depth, 3); break;
    case 1: result = with_frame_pointer(depth); break;
    case 2: result = with_alloca(depth, 40 + depth); break;
    case 3: result = with_aligned_local(depth); break;
    case 4: result = with_realigned_entry(depth); break;
  }
  asm volatile("" ::: "memory");
  return result;
}

std::vector<Comparison> run_shape(const std::function<void()>& shape) {
  std::vector<Comparison> seen;
  t_seen = &seen;
  shape();
  t_seen = nullptr;
  return seen;
}

void expect_same(const std::vector<Comparison>& seen, const char* shape, size_t min_frames) {
  ASSERT_FALSE(seen.empty()) << shape;
  for (const Comparison& c : seen) {
    ASSERT_FALSE(c.fast_refused) << shape << ": the fast walk gave up on a shape it must handle";
    ASSERT_GE(c.slow.size(), min_frames) << shape;
    ASSERT_EQ(c.fast.size(), c.slow.size()) << shape;
    for (size_t i = 0; i < c.fast.size(); ++i) EXPECT_EQ(c.fast[i], c.slow[i]) << shape << ", frame " << i;
  }
}

TEST(FastUnwindTest, RecursionOfEveryDepthMatchesLibunwind) {
  for (int depth : {0, 1, 2, 7, 20, 40, 60, 80}) {
    auto seen = run_shape([depth] { recurse(depth, 1); });
    expect_same(seen, "recursion", std::min(depth + 4, kFrames));
  }
}

TEST(FastUnwindTest, FramePointerCodeMatchesLibunwind) {
  expect_same(run_shape([] { with_frame_pointer(10); }), "frame pointer", 14);
}

TEST(FastUnwindTest, VariableSizedFramesMatchLibunwind) {
  expect_same(run_shape([] { with_alloca(6, 24); }), "alloca", 10);
}

TEST(FastUnwindTest, RealignedStacksMatchLibunwind) {
  expect_same(run_shape([] { with_aligned_local(8); }), "aligned locals", 12);
  expect_same(run_shape([] { with_realigned_entry(8); }), "realigned entry", 12);
}

TEST(FastUnwindTest, LibcFramesInTheMiddleMatchLibunwind) {
  expect_same(run_shape(through_qsort), "qsort callback", 5);
}

TEST(FastUnwindTest, MixedDeepChainMatchesLibunwind) {
  t_mixed = true;
  auto seen = run_shape([] { mixed(30); });
  t_mixed = false;
  expect_same(seen, "mixed", 64);  // each level is two frames: mixed and a shape
}

TEST(FastUnwindTest, OtherThreadsMatchLibunwindToTheirFirstFrame) {
  std::vector<Comparison> seen;
  std::thread worker([&] { seen = run_shape([] { recurse(5, 2); }); });
  worker.join();
  expect_same(seen, "std::thread", 9);
  // The thread's stack ends in start_thread/clone, not in main: the walk stopped where libunwind did.
  pthread_t raw;
  std::vector<Comparison> seen_raw;
  auto body = [](void* out) -> void* {
    *static_cast<std::vector<Comparison>*>(out) = run_shape([] { with_frame_pointer(3); });
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&raw, nullptr, body, &seen_raw), 0);
  pthread_join(raw, nullptr);
  expect_same(seen_raw, "pthread", 6);
}

TEST(FastUnwindTest, RepeatedWalksUseTheCachedRulesAndStayEqual) {
  for (int i = 0; i < 1000; ++i) {
    auto seen = run_shape([i] { recurse(i % 13, i); });
    ASSERT_EQ(seen.size(), 1u);
    ASSERT_EQ(seen[0].fast, seen[0].slow) << "walk " << i;
  }
}

TEST(FastUnwindTest, ForgettingRulesChangesNothingForLiveCode) {
  t_mixed = true;
  auto before = run_shape([] { mixed(12); });
  gmt::unwind::forget_unwind_rules();
  auto after = run_shape([] { mixed(12); });
  t_mixed = false;
  expect_same(after, "after forget_unwind_rules", 28);
  ASSERT_EQ(before.size(), 1u);
  ASSERT_EQ(after.size(), 1u);
  // The same chain below the two lambdas (whose call sites differ).
  ASSERT_GE(before[0].fast.size(), 28u);
  EXPECT_TRUE(std::equal(before[0].fast.begin(), before[0].fast.begin() + 28, after[0].fast.begin()));
}

// Whether a walk found exactly the previous walk's frames: true only for the same place reached the same way.
__attribute__((noinline)) bool walk_and_compare_with_previous() {
  void* frames[kFrames];
  bool same = false;
  EXPECT_GT(fast_backtrace(frames, kFrames, &same), 0);
  asm volatile("" ::: "memory");
  return same;
}
__attribute__((noinline)) bool via_a(int depth) {
  bool same = depth == 0 ? walk_and_compare_with_previous() : via_a(depth - 1);
  asm volatile("" ::: "memory");
  return same;
}
__attribute__((noinline)) bool via_b(int depth) {
  bool same = depth == 0 ? walk_and_compare_with_previous() : via_b(depth - 1);
  asm volatile("" ::: "memory");
  return same;
}

TEST(FastUnwindTest, AWalkKnowsWhetherItRepeatsThePreviousOne) {
  bool results[8];
  for (int i = 0; i < 2; ++i) {
    asm volatile("" : "+r"(i));
    results[i] = via_a(5);  // one call site, the loop not unrolled: the second walk repeats the first
  }
  EXPECT_TRUE(results[1]);
  EXPECT_FALSE(via_b(5)) << "another caller at the same depth";
  EXPECT_FALSE(via_b(6)) << "one frame more";
  EXPECT_FALSE(via_b(5)) << "one frame fewer than the previous walk";
  for (int i = 2; i < 4; ++i) {
    asm volatile("" : "+r"(i));
    results[i] = via_b(5);
  }
  EXPECT_TRUE(results[3]);
  gmt::unwind::forget_unwind_rules();
  EXPECT_FALSE(via_b(5)) << "after forget_unwind_rules nothing is known to repeat";
}

// Two callers of one chain whose frames have the same size: the walk starts at the same stack pointer and finds
// the same return addresses for the first frames either way; only a word far up the stack differs. A walk
// answered from the previous one (fast_unwind.cpp, Replay) must see that difference.
__attribute__((noinline)) Comparison chain(int depth) {
  Comparison c = depth == 0 ? walk_both() : chain(depth - 1);
  asm volatile("" ::: "memory");
  return c;
}
__attribute__((noinline)) Comparison caller_x(int depth) {
  volatile long pad[4] = {1, 2, 3, 4};
  Comparison c = chain(depth + static_cast<int>(pad[0] - 1));
  asm volatile("" ::: "memory");
  return c;
}
__attribute__((noinline)) Comparison caller_y(int depth) {
  volatile long pad[4] = {4, 3, 2, 1};
  Comparison c = chain(depth + static_cast<int>(pad[3] - 1));
  asm volatile("" ::: "memory");
  return c;
}

// One call site for both callers, so that everything above them is the same too.
__attribute__((noinline)) Comparison through_caller(bool y) {
  Comparison c = y ? caller_y(20) : caller_x(20);
  asm volatile("" ::: "memory");
  return c;
}

TEST(FastUnwindTest, AWalkAnsweredFromThePreviousOneSeesADifferenceFarUp) {
  std::vector<void*> first_x, first_y;
  for (int i = 0; i < 40; ++i) {
    Comparison c = through_caller(i % 2 == 1);
    ASSERT_FALSE(c.fast_refused);
    ASSERT_EQ(c.fast, c.slow) << "walk " << i;
    (i % 2 ? first_y : first_x) = c.fast;
  }
  // The premise: the two stacks differ only far from the walk's start.
  ASSERT_EQ(first_x.size(), first_y.size());
  size_t differ_at = 0;
  while (differ_at < first_x.size() && first_x[differ_at] == first_y[differ_at]) ++differ_at;
  EXPECT_GE(differ_at, 20u);
  EXPECT_LT(differ_at, first_x.size());
  // The same caller twice in a row: answered without walking, and still libunwind's stack; the same as in the
  // loop up to through_caller's frame (its caller is this test's body, from another call site now).
  for (int i = 0; i < 3; ++i) {
    Comparison c = through_caller(true);
    ASSERT_EQ(c.fast, c.slow);
    ASSERT_GT(c.fast.size(), differ_at + 2);
    EXPECT_TRUE(std::equal(first_y.begin(), first_y.begin() + static_cast<long>(differ_at) + 2, c.fast.begin()));
  }
}

// Code without frame pointers uses rbp as an ordinary register, e.g. for a loop's counter, and the functions it
// calls save it on the stack. A walk from a loop must still be answered from the previous walk (the saved value
// differs every time, but no rule uses it), and must still be libunwind's stack.
__attribute__((noinline, optimize("omit-frame-pointer"))) Comparison saves_rbp() {
  asm volatile("" ::: "rbp");  // the prologue saves the caller's rbp
  Comparison c = chain(3);
  asm volatile("" ::: "memory");
  return c;
}
__attribute__((noinline, optimize("omit-frame-pointer"))) Comparison with_rbp_holding(uintptr_t value) {
  register uintptr_t held asm("rbp") = value;
  asm volatile("" : "+r"(held));
  Comparison c = saves_rbp();
  asm volatile("" : "+r"(held));
  return c;
}

TEST(FastUnwindTest, WalksFromALoopAreAnsweredFromThePreviousOneWhateverRbpHolds) {
  const uint64_t replays_before = gmt::unwind::fast_backtrace_replays_in_this_thread();
  std::vector<void*> first;
  for (uintptr_t i = 0; i < 20; ++i) {
    Comparison c = with_rbp_holding(0x1000 + i * 16);
    ASSERT_FALSE(c.fast_refused);
    ASSERT_EQ(c.fast, c.slow) << "walk " << i;
    if (i == 0) first = c.fast;
    EXPECT_EQ(c.fast, first) << "walk " << i;
  }
  // walk_both runs the fast walk once per iteration; every one after the first is a replay.
  EXPECT_GE(gmt::unwind::fast_backtrace_replays_in_this_thread() - replays_before, 19u);
}

// Replays of a mixed chain deeper than the walk's limit. Some words the walk must check are not frames: the
// realigned frames' CFA, read through rbp. And the walk stops at the limit, so its last read (the next return
// address) is not a frame either. Each replay must give exactly the limit's frames, still libunwind's.
TEST(FastUnwindTest, RepeatedWalksOfAMixedChainCutAtTheLimitAreAnsweredExactly) {
  const uint64_t replays_before = gmt::unwind::fast_backtrace_replays_in_this_thread();
  std::vector<void*> first;
  for (int i = 0; i < 5; ++i) {
    asm volatile("" : "+r"(i));  // one call site for every walk, the loop not unrolled
    t_mixed = true;  // set only around the walk: a failed assertion below must not leave it set for other tests
    auto seen = run_shape([] { mixed(40); });
    t_mixed = false;
    ASSERT_EQ(seen.size(), 1u);
    ASSERT_FALSE(seen[0].fast_refused);
    ASSERT_EQ(seen[0].fast.size(), static_cast<size_t>(kFrames)) << "walk " << i;
    ASSERT_EQ(seen[0].fast, seen[0].slow) << "walk " << i;
    if (i == 0) first = seen[0].fast;
    EXPECT_EQ(seen[0].fast, first) << "walk " << i;
  }
  EXPECT_GE(gmt::unwind::fast_backtrace_replays_in_this_thread() - replays_before, 4u);
}

// A signal frame (__restore_rt) is beyond the walker: it must give up, never return a wrong stack.
std::vector<Comparison>* g_in_handler = nullptr;
void on_signal(int) { g_in_handler->push_back(walk_both()); }

TEST(FastUnwindTest, SignalFramesMakeTheWalkGiveUp) {
  std::vector<Comparison> seen;
  g_in_handler = &seen;
  struct sigaction action {};
  struct sigaction old {};
  action.sa_handler = on_signal;
  ASSERT_EQ(sigaction(SIGUSR1, &action, &old), 0);
  raise(SIGUSR1);
  sigaction(SIGUSR1, &old, nullptr);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(seen[0].fast_refused) << "a walk through a signal frame must be left to libunwind";
  EXPECT_GT(seen[0].slow.size(), 4u);
}

// On a stack that is not the thread's own (an alternate signal stack here), the walk cannot bound its reads:
// it must give up.
TEST(FastUnwindTest, ForeignStacksMakeTheWalkGiveUp) {
  std::vector<Comparison> seen;
  g_in_handler = &seen;
  std::vector<char> alternate(256 * 1024);
  stack_t stack{}, old_stack{};
  stack.ss_sp = alternate.data();
  stack.ss_size = alternate.size();
  ASSERT_EQ(sigaltstack(&stack, &old_stack), 0);
  struct sigaction action {};
  struct sigaction old {};
  action.sa_handler = on_signal;
  action.sa_flags = SA_ONSTACK;
  ASSERT_EQ(sigaction(SIGUSR2, &action, &old), 0);
  raise(SIGUSR2);
  sigaction(SIGUSR2, &old, nullptr);
  sigaltstack(&old_stack, nullptr);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(seen[0].fast_refused);
}

}  // namespace
