// The walks each thread keeps (unwind/fast_unwind.cpp, StoredWalk): a stack walked again is answered from the
// store by checking the stack words its kept walk depended on, with the same frames as libunwind's and the same
// identity each time; where several kept walks share a stack pointer, the order of the checks makes a place walked
// again cost one check. The walker against libunwind frame by frame: fast_unwind_test.cpp.
#include <gtest/gtest.h>
#include <libunwind.h>
#include <pthread.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "unwind/fast_unwind.h"

namespace {

using gmt::unwind::fast_backtrace;

constexpr int kFrames = 72;

struct Comparison {
  std::vector<void*> fast, slow;
  bool fast_refused = false;
};

// A thread walks from many places in turn (a training step allocates from hundreds): each stack's walk is kept
// (fast_unwind.cpp, StoredWalk) and answered from the store when the same stack comes again, however many others
// came between; the answers stay libunwind's, and one stack keeps one identity while a different one has another.
__attribute__((noinline)) Comparison walk_with_identity(gmt::unwind::WalkIdentity* identity) {
  Comparison c;
  void* fast[kFrames];
  void* slow[kFrames];
  int n_fast = fast_backtrace(fast, kFrames, nullptr, identity);
  int n_slow = unw_backtrace(slow, kFrames);
  c.fast_refused = n_fast < 0;
  if (n_fast > 0) c.fast.assign(fast + 1, fast + n_fast);  // the first frame is this function's call site
  if (n_slow > 0) c.slow.assign(slow + 1, slow + n_slow);
  asm volatile("" ::: "memory");
  return c;
}
__attribute__((noinline)) Comparison nested_a(int depth, gmt::unwind::WalkIdentity* identity) {
  Comparison c = depth == 0 ? walk_with_identity(identity) : nested_a(depth - 1, identity);
  asm volatile("" ::: "memory");
  return c;
}
__attribute__((noinline)) Comparison nested_b(int depth, gmt::unwind::WalkIdentity* identity) {
  volatile long unlike_nested_a[2] = {depth, 1};  // not folded into nested_a, which would be identical code
  Comparison c = depth == unlike_nested_a[1] - 1 ? walk_with_identity(identity) : nested_b(depth - 1, identity);
  asm volatile("" ::: "memory");
  return c;
}

TEST(FastUnwindTest, ManyStacksWalkedInTurnAreEachAnsweredFromTheStore) {
  constexpr int kPlaces = 24;  // more than one stored walk per stack pointer, fewer than the store holds
  gmt::unwind::WalkIdentity first_round[kPlaces];
  std::vector<void*> first_frames[kPlaces];
  const uint64_t replays_before = gmt::unwind::fast_backtrace_replays_in_this_thread();
  for (int round = 0; round < 3; ++round) {
    for (int place = 0; place < kPlaces; ++place) {
      asm volatile("" : "+r"(place));
      gmt::unwind::WalkIdentity identity;
      // Two chains at each depth: the same stack pointer at the walk's start, other words above it.
      Comparison c = place % 2 ? nested_b(place / 2, &identity) : nested_a(place / 2, &identity);
      ASSERT_FALSE(c.fast_refused);
      ASSERT_EQ(c.fast, c.slow) << "round " << round << ", place " << place;
      ASSERT_NE(identity.slot, 0u) << "every walk is kept or answered from the store";
      if (round == 0) {
        first_round[place] = identity;
        first_frames[place] = c.fast;
        continue;
      }
      EXPECT_EQ(c.fast, first_frames[place]);
      EXPECT_EQ(identity.slot, first_round[place].slot) << "round " << round << ", place " << place;
      EXPECT_EQ(identity.version, first_round[place].version) << "round " << round << ", place " << place;
    }
  }
  // Every walk of the second and third rounds was answered from the store.
  EXPECT_GE(gmt::unwind::fast_backtrace_replays_in_this_thread() - replays_before, 2u * kPlaces);
  for (int place = 1; place < kPlaces; ++place) {
    EXPECT_FALSE(first_round[place].slot == first_round[0].slot && first_round[place].version == first_round[0].version)
        << "place " << place << " has place 0's identity";
  }
}

// One place reached from two call sites of one caller: the same stack pointer at the walk's start and the same
// inner frames, another return address further out. The asm after each call keeps the two calls apart.
__attribute__((noinline)) Comparison reached_from(int site, gmt::unwind::WalkIdentity* identity) {
  Comparison c;
  if (site == 0) {
    c = nested_a(3, identity);
    asm volatile("nop" ::: "memory");
  } else {
    c = nested_a(3, identity);
    asm volatile("nop\n\tnop\n\tnop" ::: "memory");
  }
  return c;
}

// A walk from one of a test's sites: libunwind's frames, and in later rounds the same frames as its site's first.
void check_site_walk(const Comparison& c, int round, int site, std::vector<void*>& first_round_frames) {
  ASSERT_FALSE(c.fast_refused);
  ASSERT_EQ(c.fast, c.slow) << "round " << round << ", site " << site;
  if (round == 0) first_round_frames = c.fast;
  ASSERT_EQ(c.fast, first_round_frames) << "round " << round << ", site " << site;
}

// Stacks that share a stack pointer are kept in one set, and a walk checks them one by one until one matches: the
// one that answered last is checked first, so that a place walked again and again (an allocation loop) costs one
// check, not one per other stack kept at its stack pointer.
TEST(FastUnwindTest, APlaceWalkedAgainIsCheckedAgainstItsOwnStoredWalkFirst) {
  gmt::unwind::WalkIdentity identities[2];
  std::vector<void*> frames[2];
  for (int round = 0; round < 4; ++round) {  // round 0 keeps both walks
    for (int site = 0; site < 2; ++site) {
      const uint64_t checks_before = gmt::unwind::fast_backtrace_word_checks_in_this_thread();
      const uint64_t replays_before = gmt::unwind::fast_backtrace_replays_in_this_thread();
      for (int i = 0; i < 10; ++i) {
        asm volatile("" : "+r"(site), "+r"(i));
        gmt::unwind::WalkIdentity identity;
        Comparison c = reached_from(site, &identity);
        ASSERT_FALSE(c.fast_refused);
        ASSERT_EQ(c.fast, c.slow) << "round " << round << ", site " << site << ", walk " << i;
        if (round == 0 && i == 0) {
          frames[site] = c.fast;
          identities[site] = identity;
        }
        ASSERT_EQ(c.fast, frames[site]) << "round " << round << ", site " << site << ", walk " << i;
        ASSERT_EQ(identity.version, identities[site].version);
      }
      if (round == 0) continue;
      EXPECT_EQ(gmt::unwind::fast_backtrace_replays_in_this_thread() - replays_before, 10u);
      // The first two walks of a run may each check the other site's stored walk first (the order learned at the
      // last switch, fast_unwind.cpp: ThreadWalk::successor); the eight after them check their own.
      EXPECT_LE(gmt::unwind::fast_backtrace_word_checks_in_this_thread() - checks_before, 12u)
          << "round " << round << ", site " << site;
    }
  }
  ASSERT_NE(frames[0], frames[1]) << "the two call sites were merged into one";
  ASSERT_NE(identities[0].version, identities[1].version);
}

// Two places that alternate at one stack pointer (a training step's allocations come in the same order every step):
// the way that answered last in the set is always the other place's, but the walk that followed the previous one
// last time is this one, and it is checked first: one check per walk once the order has been seen.
TEST(FastUnwindTest, PlacesThatAlternateAtOneStackPointerAreEachCheckedOnce) {
  std::vector<void*> frames[2];
  uint64_t checks = 0, replays = 0;
  for (int round = 0; round < 5; ++round) {
    for (int site = 0; site < 2; ++site) {
      asm volatile("" : "+r"(site));
      const uint64_t checks_before = gmt::unwind::fast_backtrace_word_checks_in_this_thread();
      const uint64_t replays_before = gmt::unwind::fast_backtrace_replays_in_this_thread();
      gmt::unwind::WalkIdentity identity;
      ASSERT_NO_FATAL_FAILURE(check_site_walk(reached_from(site, &identity), round, site, frames[site]));
      if (round < 2) continue;  // round 0 keeps both walks, round 1 sees their order
      checks += gmt::unwind::fast_backtrace_word_checks_in_this_thread() - checks_before;
      replays += gmt::unwind::fast_backtrace_replays_in_this_thread() - replays_before;
    }
  }
  ASSERT_NE(frames[0], frames[1]) << "the two call sites were merged into one";
  EXPECT_EQ(replays, 6u);
  EXPECT_EQ(checks, 6u) << "walks that alternate checked the other place's stored walk first";
}

// Many places reached at one stack pointer: the same inner frames, each site another function of the same frame
// size (its own return address further out), all called from one call site below.
template <int Site>
__attribute__((noinline)) Comparison at_site(gmt::unwind::WalkIdentity* identity) {
  Comparison c = nested_a(3, identity);
  asm volatile(".rept %c0\n\tnop\n\t.endr" ::"i"(Site + 1) : "memory");  // no two sites folded into one
  return c;
}
using SiteFunction = Comparison (*)(gmt::unwind::WalkIdentity*);
constexpr SiteFunction kSites[] = {at_site<0>, at_site<1>, at_site<2>, at_site<3>, at_site<4>,  at_site<5>,
                                   at_site<6>, at_site<7>, at_site<8>, at_site<9>, at_site<10>, at_site<11>};
__attribute__((noinline)) Comparison walk_at_site(int site, gmt::unwind::WalkIdentity* identity) {
  SiteFunction f = kSites[site];
  asm volatile("" : "+r"(f));
  Comparison c = f(identity);
  asm volatile("" ::: "memory");
  return c;
}

// Runs `body` on a thread of its own: a store of kept walks that no earlier test filled.
template <typename Body>
void on_a_fresh_thread(Body body) {
  std::thread thread(body);
  thread.join();
}

// Several hot places at one stack pointer (one step's allocations at one depth: they all share one set of the store)
// are all kept while they fit the set's ways, walked in turn or not. A store that overwrote its ways in turn lost
// every one of six places taken in a cycle, each overwritten just before its next use, where it had four ways.
TEST(FastUnwindTest, SixPlacesAtOneStackPointerTakenInTurnAreAllAnsweredFromTheStore) {
  constexpr int kPlaces = 6;
  std::vector<void*> frames[kPlaces];
  uint64_t replays = 0, evictions = 0;
  on_a_fresh_thread([&] {
    for (int round = 0; round < 4; ++round) {
      for (int site = 0; site < kPlaces; ++site) {
        asm volatile("" : "+r"(site));
        const uint64_t replays_before = gmt::unwind::fast_backtrace_replays_in_this_thread();
        gmt::unwind::WalkIdentity identity;
        ASSERT_NO_FATAL_FAILURE(check_site_walk(walk_at_site(site, &identity), round, site, frames[site]));
        if (round > 0) replays += gmt::unwind::fast_backtrace_replays_in_this_thread() - replays_before;
      }
    }
    evictions = gmt::unwind::fast_backtrace_evictions_in_this_thread();
  });
  for (int site = 1; site < kPlaces; ++site) ASSERT_NE(frames[site], frames[0]) << "site " << site;
  EXPECT_EQ(replays, 3u * kPlaces) << "places kept at one stack pointer were overwritten before their next use";
  EXPECT_EQ(evictions, 0u);
}

// A set that must take more walks than its ways loses the least recently used ones: a place walked between every
// one of a run of walks seen once each (a warm-up's, a rare path's) keeps its stored walk, where overwriting in turn
// lost it once the others had filled the ways after it.
TEST(FastUnwindTest, AHotPlaceKeepsItsStoredWalkWhileOnceSeenPlacesFillItsSet) {
  constexpr int kOnceSeen = 11;  // more than the set's other ways
  std::vector<int> sites;        // 0, 1, 0, 2, 0, ..., 0, 11, 0: the hot place between each of the others
  for (int site = 1; site <= kOnceSeen; ++site) sites.insert(sites.end(), {0, site});
  sites.push_back(0);
  std::vector<Comparison> seen;
  std::vector<gmt::unwind::WalkIdentity> identities;
  std::vector<uint64_t> replayed;
  uint64_t evictions = 0;
  on_a_fresh_thread([&] {
    for (int site : sites) {  // one call site for all: the places differ only by the site function
      const uint64_t replays_before = gmt::unwind::fast_backtrace_replays_in_this_thread();
      gmt::unwind::WalkIdentity identity;
      seen.push_back(walk_at_site(site, &identity));
      identities.push_back(identity);
      replayed.push_back(gmt::unwind::fast_backtrace_replays_in_this_thread() - replays_before);
    }
    evictions = gmt::unwind::fast_backtrace_evictions_in_this_thread();
  });
  ASSERT_EQ(seen.size(), sites.size());
  for (size_t i = 0; i < sites.size(); ++i) {
    ASSERT_FALSE(seen[i].fast_refused) << "walk " << i;
    ASSERT_EQ(seen[i].fast, seen[i].slow) << "walk " << i;
    ASSERT_NE(identities[i].slot, 0u) << "walk " << i;
    if (sites[i] != 0) {
      EXPECT_EQ(replayed[i], 0u) << "walk " << i << ": site " << sites[i] << " is seen once";
      ASSERT_NE(seen[i].fast, seen[0].fast) << "site " << sites[i] << " was folded into site 0";
      continue;
    }
    ASSERT_EQ(seen[i].fast, seen[0].fast) << "walk " << i;
    if (i == 0) continue;
    EXPECT_EQ(replayed[i], 1u) << "walk " << i << ": the hot place was walked afresh";
    EXPECT_EQ(identities[i].slot, identities[0].slot) << "walk " << i;
    EXPECT_EQ(identities[i].version, identities[0].version) << "walk " << i;
  }
  // The once-seen places overflowed the set by the ones the hot place's way could not take: the store says it
  // overwrote that many valid walks.
  EXPECT_EQ(evictions, static_cast<uint64_t>(kOnceSeen - (gmt::unwind::kWalkWays - 1)));
}

// A stored walk names each word it depends on by its distance from the walk's start in two bytes (512 KiB): a
// stack with a frame larger than that in the middle is walked afresh each time, never kept, and stays exact.
// Not instrumented by ASan, which could move the array to a heap-allocated fake frame.
__attribute__((noinline, no_sanitize("address"))) Comparison beneath_a_large_frame(
    gmt::unwind::WalkIdentity* identity) {
  volatile char large[600 * 1024];
  large[0] = 1;
  large[sizeof large - 1] = 2;
  Comparison c = nested_a(2, identity);
  asm volatile("" ::: "memory");
  return c;
}

TEST(FastUnwindTest, AStackWithAFrameBeyondTheStoresReachIsWalkedAfreshAndStaysExact) {
  std::vector<Comparison> seen;
  std::vector<gmt::unwind::WalkIdentity> identities;
  uint64_t replays = 0;
  auto body = [&] {
    const uint64_t replays_before = gmt::unwind::fast_backtrace_replays_in_this_thread();
    for (int i = 0; i < 3; ++i) {
      asm volatile("" : "+r"(i));
      gmt::unwind::WalkIdentity identity;
      seen.push_back(beneath_a_large_frame(&identity));
      identities.push_back(identity);
    }
    replays = gmt::unwind::fast_backtrace_replays_in_this_thread() - replays_before;
  };
  // On a thread of its own with a stack known to hold the frame (4 MiB).
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, 4 << 20), 0);
  pthread_t thread;
  auto trampoline = [](void* f) -> void* {
    (*static_cast<decltype(body)*>(f))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attr, trampoline, &body), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  ASSERT_EQ(seen.size(), 3u);
  for (size_t i = 0; i < seen.size(); ++i) {
    ASSERT_FALSE(seen[i].fast_refused) << "walk " << i;
    ASSERT_GE(seen[i].slow.size(), 5u) << "walk " << i;
    EXPECT_EQ(seen[i].fast, seen[i].slow) << "walk " << i;
    EXPECT_EQ(identities[i].slot, 0u) << "walk " << i << " was kept though a word lies beyond 512 KiB";
  }
  EXPECT_EQ(replays, 0u);
}

}  // namespace
