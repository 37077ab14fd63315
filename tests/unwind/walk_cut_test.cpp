// The walker's cut (unwind/fast_unwind.h, StoredAnswer::kToTheCut): a kept walk answers for its frames up to the
// first one inside the cut range, from the stack words of those frames only, and says that its frames end there;
// asked for the whole stack it answers only when every word is unchanged. A function of tests/stacks/
// stack_memo_places.cpp, alone in a section of its own so that its code range is known exactly, stands for
// CPython's eval loop; its two callers with frames of one size stand for two native paths to the same Python frames.
#include <gtest/gtest.h>
#include <libunwind.h>

#include <cstdint>
#include <vector>

#include "tests/stacks/stack_memo_places.h"
#include "unwind/fast_unwind.h"

namespace {

using gmt::unwind::fast_backtrace;
using gmt::unwind::StoredAnswer;
using gmt::unwind::WalkIdentity;

constexpr int kFrames = 72;

struct Walk {
  std::vector<void*> fast, slow;  // from the frame above walk_here on (its own call sites differ)
  WalkIdentity identity;
  bool refused = false;
};

struct Request {
  StoredAnswer answer;
  bool other_inner_path;  // reach walk_here through another call site below the cut
  Walk walk;
};

__attribute__((noinline)) void walk_here(Request& request) {
  void* fast[kFrames];
  void* slow[kFrames];
  int n_fast = fast_backtrace(fast, kFrames, nullptr, &request.walk.identity, nullptr, request.answer);
  int n_slow = unw_backtrace(slow, kFrames);
  request.walk.refused = n_fast < 0;
  if (n_fast > 0) request.walk.fast.assign(fast + 1, fast + n_fast);
  if (n_slow > 0) request.walk.slow.assign(slow + 1, slow + n_slow);
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void inner_a(Request& request) {
  walk_here(request);
  asm volatile("" ::: "memory");
}
__attribute__((noinline)) void inner_b(Request& request) {
  volatile int unlike_inner_a = 1;  // not folded into inner_a
  walk_here(request);
  asm volatile("" : : "r"(unlike_inner_a) : "memory");
}

// What the stand-in calls: every frame from here down is below the cut, and checked.
__attribute__((noinline)) void below_the_cut(void* argument) {
  auto& request = *static_cast<Request*>(argument);
  if (request.other_inner_path) {
    inner_b(request);
  } else {
    inner_a(request);
  }
  asm volatile("" ::: "memory");
}

// One call site for both paths, so that everything above them is the same too.
__attribute__((noinline)) Walk walk_through(bool path_y, StoredAnswer answer, bool other_inner_path = false) {
  Request request{answer, other_inner_path, {}};
  call_through_cut(path_y ? 1 : 0, below_the_cut, &request);
  asm volatile("" ::: "memory");
  return request.walk;
}

struct CutRange {
  uintptr_t begin = 0, end = 0;
};
const CutRange& cut_range() {
  static const CutRange range = [] {
    CutRange r;
    walk_cut_stand_in_range(&r.begin, &r.end);
    return r;
  }();
  return range;
}

bool inside_the_cut(void* pc) {
  auto address = reinterpret_cast<uintptr_t>(pc) - 1;
  return address >= cut_range().begin && address < cut_range().end;
}

struct Step {
  bool path_y;
  StoredAnswer answer;
  bool other_inner_path = false;
};

// Every step's walk from one call site here, so that the frames above walk_through are the same for all.
std::vector<Walk> walk_in_turn(const std::vector<Step>& steps) {
  std::vector<Walk> walks;
  for (size_t i = 0; i < steps.size(); ++i) {
    asm volatile("" : "+r"(i));  // the loop not unrolled into several call sites
    walks.push_back(walk_through(steps[i].path_y, steps[i].answer, steps[i].other_inner_path));
  }
  return walks;
}

class WalkCutTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gmt::unwind::set_walk_cut(cut_range().begin, cut_range().end); }
};

bool same_identity(const WalkIdentity& a, const WalkIdentity& b) { return a.slot == b.slot && a.version == b.version; }

TEST_F(WalkCutTest, AKeptWalkAnswersToTheCutWhateverLiesBeyondIt) {
  constexpr StoredAnswer kWhole = StoredAnswer::kWhole, kToTheCut = StoredAnswer::kToTheCut;
  const std::vector<Walk> w = walk_in_turn({{false, kWhole},
                                            {true, kWhole},
                                            {false, kToTheCut},
                                            {false, kToTheCut},
                                            {true, kToTheCut},
                                            {false, kToTheCut},
                                            {true, kToTheCut},
                                            {true, kWhole},
                                            {false, StoredAnswer::kWholeUnkept},
                                            {true, StoredAnswer::kWholeUnkept, true},
                                            {true, StoredAnswer::kWholeUnkept, true},
                                            {true, kToTheCut}});
  // Each path walked whole first, as libunwind sees it: the premise that the two differ only beyond the cut.
  const Walk &whole_x = w[0], &whole_y = w[1];
  ASSERT_FALSE(whole_x.refused);
  ASSERT_EQ(whole_x.fast, whole_x.slow);
  ASSERT_EQ(whole_y.fast, whole_y.slow);
  size_t cut = 0;
  while (cut < whole_x.fast.size() && !inside_the_cut(whole_x.fast[cut])) ++cut;
  ASSERT_LT(cut + 1, whole_x.fast.size()) << "the stand-in's frame is on the stack, under others";
  ASSERT_EQ(whole_x.fast.size(), whole_y.fast.size());
  const auto to_the_cut = [cut](const std::vector<void*>& frames) {
    return std::vector<void*>(frames.begin(), frames.begin() + static_cast<long>(cut) + 1);
  };
  EXPECT_EQ(to_the_cut(whole_x.fast), to_the_cut(whole_y.fast));
  EXPECT_NE(whole_x.fast[cut + 1], whole_y.fast[cut + 1]) << "gmt_path_x and gmt_path_y return to other places";

  // Every walk is kept with where it crossed the cut: path x's, kept by its whole walk, answers every walk to the
  // cut from then on, from either path, and says that its frames end at the cut.
  EXPECT_TRUE(whole_x.identity.cut);
  EXPECT_FALSE(whole_x.identity.frames_end_at_cut);
  for (size_t i = 2; i < 7; ++i) {
    ASSERT_TRUE(w[i].identity.frames_end_at_cut) << "walk " << i;
    EXPECT_TRUE(w[i].identity.cut);
    EXPECT_TRUE(same_identity(w[i].identity, whole_x.identity)) << "walk " << i;
    EXPECT_EQ(w[i].fast, to_the_cut(w[i].slow)) << "walk " << i;  // libunwind's frames up to the cut, no more
  }
  // Asked for the whole stack, a kept walk answers only with every word unchanged: path y's walk is y's.
  EXPECT_EQ(w[7].fast, whole_y.slow);
  EXPECT_EQ(w[7].slow, whole_y.slow);
  EXPECT_FALSE(w[7].identity.frames_end_at_cut);
  // kWholeUnkept: whole answers from the store as kWhole gives them (path x's); a stack never walked before is
  // walked afresh and not kept (no identity, and walked afresh again the next time); and path x's kept walk still
  // answers to the cut after them.
  EXPECT_EQ(w[8].fast, whole_x.slow);
  EXPECT_TRUE(same_identity(w[8].identity, whole_x.identity));
  for (size_t i : {9, 10}) {
    EXPECT_EQ(w[i].fast, w[i].slow) << "walk " << i;
    EXPECT_NE(w[i].fast, whole_y.slow) << "walk " << i << ": the other call site below the cut";
    EXPECT_EQ(w[i].identity.slot, 0u) << "walk " << i;
  }
  EXPECT_TRUE(w[11].identity.frames_end_at_cut);
  EXPECT_TRUE(same_identity(w[11].identity, whole_x.identity));
}

TEST_F(WalkCutTest, AChangeBelowTheCutIsSeen) {
  constexpr StoredAnswer kToTheCut = StoredAnswer::kToTheCut;
  // Path x kept and answered to the cut; then another call site below the cut, at the same stack pointer.
  const std::vector<Walk> w = walk_in_turn({{false, kToTheCut}, {false, kToTheCut}, {false, kToTheCut, true}});
  ASSERT_TRUE(w[1].identity.frames_end_at_cut);
  EXPECT_FALSE(w[2].identity.frames_end_at_cut);
  EXPECT_EQ(w[2].fast, w[2].slow);
  EXPECT_NE(w[2].fast, w[0].fast);
  EXPECT_FALSE(same_identity(w[2].identity, w[1].identity));
}

TEST_F(WalkCutTest, WalksThatNeverCrossTheCutAnswerWhole) {
  // walk_here called directly: no frame of the stand-in on the stack.
  for (int i = 0; i < 3; ++i) {
    asm volatile("" : "+r"(i));  // one call site, the loop not unrolled
    Request request{StoredAnswer::kToTheCut, false, {}};
    walk_here(request);
    ASSERT_FALSE(request.walk.refused);
    EXPECT_EQ(request.walk.fast, request.walk.slow) << "walk " << i;
    EXPECT_FALSE(request.walk.identity.cut);
    EXPECT_FALSE(request.walk.identity.frames_end_at_cut);
  }
}

}  // namespace
