// Unit tests of the pieces the NVTX hooks rely on, linked straight from their sources: string interning
// (recorder/strings.cpp) and the domain / registered-string handle tables (nvtx/registry.cpp).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "nvtx/registry.h"
#include "recorder/strings.h"

namespace gmt {
namespace {

using recorder::intern_string;
using recorder::string_count;
using recorder::string_text;

TEST(StringsTest, EqualTextsGetEqualIdsAndTextsRoundTrip) {
  uint32_t a = intern_string("epoch");
  uint32_t b = intern_string("step");
  EXPECT_NE(a, 0u);
  EXPECT_NE(a, b);
  EXPECT_EQ(intern_string(std::string("ep") + "och"), a);  // another buffer, same text
  EXPECT_EQ(string_text(a), "epoch");
  EXPECT_EQ(string_text(b), "step");
  EXPECT_GE(string_count(), b);
}

TEST(StringsTest, EmptyTextIsNoName) {
  EXPECT_EQ(intern_string(""), 0u);
  EXPECT_EQ(string_text(0), "");
}

TEST(StringsTest, LongTextIsCutAtACharacterBoundary) {
  // 4095 ASCII bytes then a two-byte character that would straddle the 4096-byte limit: cut before it.
  std::string text(recorder::kMaxStringBytes - 1, 'a');
  text += "\xc3\xa9 and more";
  uint32_t id = intern_string(text);
  EXPECT_EQ(string_text(id), std::string(recorder::kMaxStringBytes - 1, 'a'));
}

TEST(StringsTest, ThreadsInterningTheSameNamesAgreeOnIds) {
  constexpr int kThreads = 8, kNames = 500;
  std::vector<std::vector<uint32_t>> ids(kThreads, std::vector<uint32_t>(kNames));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &ids] {
      for (int round = 0; round < 3; ++round) {
        for (int i = 0; i < kNames; ++i) ids[t][i] = intern_string("concurrent " + std::to_string(i));
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<uint32_t> distinct;
  for (int i = 0; i < kNames; ++i) {
    for (int t = 1; t < kThreads; ++t) EXPECT_EQ(ids[t][i], ids[0][i]);
    EXPECT_EQ(string_text(ids[0][i]), "concurrent " + std::to_string(i));
    distinct.insert(ids[0][i]);
  }
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kNames));
}

// A fork while another thread interns must leave the child a usable table with the parent's ids.
TEST(StringsTest, ForkWhileAnotherThreadInternsKeepsTheTableUsable) {
  uint32_t before = intern_string("before fork");
  std::atomic<bool> stop{false};
  std::thread busy([&stop] {
    for (int i = 0; !stop.load(); ++i) intern_string("busy " + std::to_string(i % 5000));
  });
  for (int round = 0; round < 20; ++round) {
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      bool ok = intern_string("before fork") == before && intern_string("new in child") != 0 &&
                string_text(before) == "before fork";
      _exit(ok ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "round " << round;
  }
  stop = true;
  busy.join();
}

TEST(RegistryTest, DomainsMapTheHandleTheAppHoldsToTheirName) {
  uint32_t name = intern_string("my domain");
  int chained_object = 0;
  const void* chained = &chained_object;
  EXPECT_EQ(nvtx::register_domain(name, chained, false), chained);  // the chained tool's handle goes to the app
  nvtx::DomainInfo d = nvtx::find_domain(chained);
  EXPECT_EQ(d.name_id, name);
  EXPECT_FALSE(d.own);
  EXPECT_FALSE(d.fake);

  const void* ours = nvtx::register_domain(intern_string("no tool"), nullptr, true);
  ASSERT_NE(ours, nullptr);
  nvtx::DomainInfo o = nvtx::find_domain(ours);
  EXPECT_EQ(string_text(o.name_id), "no tool");
  EXPECT_TRUE(o.own);
  EXPECT_TRUE(o.fake);  // forwarded to a chained tool as nullptr

  EXPECT_EQ(nvtx::find_domain(nullptr).name_id, 0u);  // the default domain
  int stranger = 0;
  EXPECT_EQ(string_text(nvtx::find_domain(&stranger).name_id), "(unknown domain)");
}

TEST(RegistryTest, RegisteredStringsMapToTheirName) {
  uint32_t name = intern_string("load batch");
  const void* ours = nvtx::register_string(name, nullptr);
  ASSERT_NE(ours, nullptr);
  EXPECT_EQ(nvtx::find_string(ours).name_id, name);
  EXPECT_TRUE(nvtx::find_string(ours).fake);
  int chained_object = 0;
  EXPECT_EQ(nvtx::register_string(name, &chained_object), &chained_object);
  EXPECT_EQ(nvtx::find_string(&chained_object).name_id, name);
  EXPECT_FALSE(nvtx::find_string(&chained_object).fake);
  EXPECT_EQ(nvtx::find_string(nullptr).name_id, 0u);
}

TEST(RegistryTest, ManyDomainsStayDistinct) {
  std::vector<const void*> handles;
  for (int i = 0; i < 200; ++i) {
    handles.push_back(nvtx::register_domain(intern_string("d" + std::to_string(i)), nullptr, false));
  }
  for (int i = 0; i < 200; ++i) EXPECT_EQ(string_text(nvtx::find_domain(handles[i]).name_id), "d" + std::to_string(i));
}

}  // namespace
}  // namespace gmt
