// The stack memo (recorder/stacks.h): a stack taken again at the same place comes with the id it was interned
// under, without being walked, merged or hashed again; and the check mode (GMT_UNWIND=check) takes every memo
// answer in full too and counts the answers that differ, so that a stale entry cannot go unseen. Driven here as
// record() drives it (recorder/recorder.cpp, stack_id_of), with a StackTable of the test's own.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "recorder/caller_stack.h"
#include "recorder/guard.h"
#include "recorder/recorder.h"
#include "recorder/self_cost.h"
#include "recorder/settings.h"
#include "recorder/stacks.h"
#include "schema/environment.h"
#include "tests/stacks/stack_memo_places.h"
#include "unwind/fast_unwind.h"

namespace {

using gmt::recorder::capture_stack;
using gmt::recorder::RawStack;
using gmt::recorder::StackTable;

// What record() does with a captured stack (recorder/recorder.cpp): stack_id_of, interning into the test's table.
StackTable::Interned intern_into(void* table, const RawStack& stack, uint64_t hash) {
  auto& into = *static_cast<StackTable*>(table);
  StackTable::Interned interned = into.intern(stack, hash);
  gmt::recorder::remember_stack_id(into, stack, hash, interned);
  return interned;
}

uint32_t id_as_record_takes_it(StackTable& table, const RawStack& stack) {
  return gmt::recorder::stack_id_of(table, stack, intern_into, &table);
}

struct Taken {
  uint32_t id;
  bool from_memo;
  std::vector<uintptr_t> pcs;
};

struct Taking {
  StackTable* table;
  Taken taken;
};

void take(void* argument) {
  auto* taking = static_cast<Taking*>(argument);
  RawStack stack;
  capture_stack(stack);
  const bool from_memo = stack.known_id != 0;
  const uintptr_t* pcs = from_memo ? stack.known_pcs : stack.pcs;  // a memo answer's frames are the table's
  taking->taken =
      Taken{id_as_record_takes_it(*taking->table, stack), from_memo, std::vector<uintptr_t>(pcs, pcs + stack.depth)};
}

Taken from(StackTable& table, int place) {
  Taking taking{&table, {}};
  call_from_place(place, take, &taking);
  return taking.taken;
}

constexpr int kPlaces = 12;

TEST(StackMemoTest, AStackTakenAgainComesWithItsIdAndItsFrames) {
  gmt::recorder::settings().unwind = gmt::recorder::UnwindMode::Fast;
  StackTable table;
  std::vector<Taken> first;
  for (int round = 0; round < 4; ++round) {
    for (int place = 0; place < kPlaces; ++place) {
      asm volatile("" : "+r"(place));
      Taken t = from(table, place);
      ASSERT_NE(t.id, 0u);
      if (round == 0) {
        first.push_back(t);
        continue;
      }
      EXPECT_EQ(t.id, first[place].id) << "round " << round << ", place " << place;
      EXPECT_EQ(t.pcs, first[place].pcs) << "round " << round << ", place " << place;
      // The first round walks and interns (and fills the memo, but for the thread's very first stack), from the
      // second on the memo answers.
      if (round >= 2 || (round == 1 && place > 0)) {
        EXPECT_TRUE(t.from_memo) << "round " << round << ", place " << place;
      }
    }
  }
  EXPECT_EQ(table.size(), static_cast<size_t>(kPlaces)) << "one stack per place, each interned once";
}

// The walker's cut (unwind::StoredAnswer::kToTheCut) without a Python chain: the walk is answered up to the eval
// loop's stand-in, but nothing stands for the native frames beyond it, so the memo gives no answer and the stack is
// taken whole: each of two native paths to the stand-in keeps its own stack, as libunwind sees it.
__attribute__((noinline)) Taken through_cut(StackTable& table, bool path_y) {
  Taking taking{&table, {}};
  call_through_cut(path_y, take, &taking);
  return taking.taken;
}

TEST(StackMemoTest, BeyondTheCutWithoutAPythonChainTheStackIsTakenWhole) {
  gmt::recorder::settings().unwind = gmt::recorder::UnwindMode::Fast;
  gmt::recorder::settings().stack_cut = true;  // GMT_STACK_CUT=1
  uintptr_t begin = 0, end = 0;
  walk_cut_stand_in_range(&begin, &end);
  gmt::unwind::set_walk_cut(begin, end);
  StackTable table;
  const uint64_t cut_answers_before = gmt::unwind::fast_backtrace_cut_answers_in_this_thread();
  std::vector<Taken> taken;
  for (int i = 0; i < 8; ++i) {
    asm volatile("" : "+r"(i));  // one call site for every capture
    taken.push_back(through_cut(table, i % 2 == 1));
  }
  const Taken &x = taken[0], &y = taken[1];
  ASSERT_NE(x.id, y.id);
  ASSERT_EQ(x.pcs.size(), y.pcs.size());
  size_t cut = 0;
  while (cut < x.pcs.size() && !(x.pcs[cut] - 1 >= begin && x.pcs[cut] - 1 < end)) ++cut;
  ASSERT_LT(cut + 1, x.pcs.size()) << "the stand-in's frame is in the stack, under others";
  EXPECT_TRUE(std::equal(x.pcs.begin(), x.pcs.begin() + static_cast<long>(cut) + 1, y.pcs.begin()));
  for (size_t i = 2; i < taken.size(); ++i) {
    const Taken& expected = i % 2 ? y : x;
    EXPECT_EQ(taken[i].id, expected.id) << "capture " << i;
    EXPECT_EQ(taken[i].pcs, expected.pcs) << "capture " << i;
    EXPECT_FALSE(taken[i].from_memo) << "capture " << i;
  }
  // The premise: the walks were answered to the cut (then taken whole), not walked afresh each time.
  EXPECT_GE(gmt::unwind::fast_backtrace_cut_answers_in_this_thread() - cut_answers_before, 6u);
  EXPECT_EQ(table.size(), 2u);
  gmt::recorder::settings().stack_cut = false;
}

// Every place once, from one call site (the stacks include the frames above it).
__attribute__((noinline)) std::vector<uint32_t> round_of_places(StackTable& table) {
  std::vector<uint32_t> ids;
  for (int place = 0; place < kPlaces; ++place) {
    asm volatile("" : "+r"(place));
    ids.push_back(from(table, place).id);
  }
  return ids;
}

TEST(StackMemoTest, TheCheckModeCountsAStaleEntry) {
  gmt::recorder::settings().unwind = gmt::recorder::UnwindMode::Check;
  StackTable table;
  std::vector<uint32_t> expected;
  for (int round = 0; round < 5; ++round) {
    asm volatile("" : "+r"(round));
    // Round 3: the memo answers every place, and the check finds each answer right. Round 4: every entry is
    // stale, and the check must catch each one.
    if (round == 4) gmt::recorder::plant_stale_stack_memo_for_testing(9999);
    const auto before = gmt::recorder::stack_walk_counts();
    const std::vector<uint32_t> ids = round_of_places(table);
    const auto after = gmt::recorder::stack_walk_counts();
    if (round == 0) expected = ids;
    EXPECT_EQ(ids, expected) << "round " << round << ": the full stack is the one recorded";
    if (round == 3) {
      EXPECT_EQ(after.memo_checked - before.memo_checked, static_cast<uint64_t>(kPlaces));
      EXPECT_EQ(after.memo_mismatches, before.memo_mismatches) << "a memo answer differed from the full stack";
    }
    if (round == 4) {
      EXPECT_EQ(after.memo_checked - before.memo_checked, static_cast<uint64_t>(kPlaces));
      EXPECT_EQ(after.memo_mismatches - before.memo_mismatches, static_cast<uint64_t>(kPlaces));
    }
  }
  EXPECT_NE(gmt::recorder::stack_memo_mismatch_examples().find("9999:"), std::string::npos);
  gmt::recorder::settings().unwind = gmt::recorder::UnwindMode::Fast;
}

// A capture chosen for the self-cost sample walks the same stack as any other (recorder/recorder.cpp, record()):
// the same stored walk answers it. When the timed capture had a call of its own, its stack had another return
// address in our code, so it was a walk apart, answered by a fresh walk far more often than the events it stands
// for, and the sample measured those.
void take_caller_stack(void* timed) {
  gmt::recorder::CallerStack caller_stack(true);
  if (gmt::recorder::t_caller_capture_ns != 0) ++*static_cast<int*>(timed);
}

TEST(StackMemoTest, ATimedCaptureIsAnsweredByTheSameStoredWalk) {
  gmt::recorder::settings().unwind = gmt::recorder::UnwindMode::Fast;
  gmt::recorder::settings().take_stacks = true;
  constexpr int kCaptures = 20 * static_cast<int>(gmt::recorder::kSelfCostSampleEvery);
  int timed = 0, timed_and_walked = 0;
  for (int i = 0; i < kCaptures; ++i) {  // one call site, so one stack
    const uint64_t stored_before = gmt::unwind::fast_backtrace_replays_in_this_thread();
    const int timed_before = timed;
    call_from_place(3, take_caller_stack, &timed);
    const bool walked = gmt::unwind::fast_backtrace_replays_in_this_thread() == stored_before;
    if (i > 0 && timed > timed_before && walked) ++timed_and_walked;
  }
  EXPECT_GE(timed, kCaptures / static_cast<int>(gmt::recorder::kSelfCostSampleEvery) / 2);
  EXPECT_EQ(timed_and_walked, 0) << "of " << timed << " timed captures";
}

// The same for record() taking its own stack (no hook's caller stack), as PyTorch's tensor blocks do: its timing
// starts on a branch of its own, and capture_stack is still called from one place.
void record_an_allocation(void* address) {
  gmt::recorder::HookScope scope;  // as a hook would
  ASSERT_TRUE(scope.active());
  gmt::recorder::EventRecord event;
  event.time_ns = gmt::recorder::now_ns();
  event.thread_id = gmt::recorder::current_thread_id();
  event.kind = gmt::schema::EventKind::Alloc;
  event.api = gmt::schema::Api::cudaMalloc;
  event.memory_kind = gmt::schema::MemoryKind::Device;
  event.call.address = reinterpret_cast<uintptr_t>(address);
  event.call.size = 256;
  gmt::recorder::record(event, /*take_stack=*/true);
}

TEST(StackMemoTest, ATimedRecordIsAnsweredByTheSameStoredWalk) {
  // In the working directory (the build's tests folder under ctest), replaced at each run: the writer closes it
  // at exit.
  setenv(gmt::schema::env::kOutput, "stack_memo_timed_record.db", 1);
  gmt::recorder::load_settings_from_environment();
  gmt::recorder::settings().unwind = gmt::recorder::UnwindMode::Fast;
  gmt::recorder::settings().take_stacks = true;
  constexpr int kEvents = 20 * static_cast<int>(gmt::recorder::kSelfCostSampleEvery);
  int timed = 0, timed_and_walked = 0;
  for (int i = 0; i < kEvents; ++i) {  // one call site, so one stack
    const uint64_t stored_before = gmt::unwind::fast_backtrace_replays_in_this_thread();
    const gmt::recorder::SelfCostTotals before = gmt::recorder::self_cost_totals();
    call_from_place(3, record_an_allocation, reinterpret_cast<void*>(uintptr_t{0x1000} * (i + 1)));
    const gmt::recorder::SelfCostTotals after = gmt::recorder::self_cost_totals();
    const bool was_timed = after.sampled[0] + after.preempted != before.sampled[0] + before.preempted;
    const bool walked = gmt::unwind::fast_backtrace_replays_in_this_thread() == stored_before;
    timed += was_timed ? 1 : 0;
    if (i > 0 && was_timed && walked) ++timed_and_walked;
  }
  EXPECT_GE(timed, kEvents / static_cast<int>(gmt::recorder::kSelfCostSampleEvery) / 2);
  EXPECT_EQ(timed_and_walked, 0) << "of " << timed << " timed records";
}

}  // namespace
