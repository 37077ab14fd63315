// The runtime-callback state machine of cupti/runtime_naming.h, against a CUPTI table whose
// cuptiEnableCallback records what it was asked (the real libcupti needs a GPU: tests/gpu covers that side).
#include "cupti/runtime_naming.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "cupti/cupti_callbacks.h"
#include "schema/environment.h"

namespace gmt::cupti {
namespace {

using schema::Api;

struct EnableCall {
  uint32_t enable;
  CUpti_CallbackDomain domain;
  CUpti_CallbackId cbid;
};
std::vector<EnableCall> g_calls;

CUptiResult CUPTIAPI record_enable(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain domain,
                                   CUpti_CallbackId cbid) {
  g_calls.push_back({enable, domain, cbid});
  return CUPTI_SUCCESS;
}

size_t runtime_site_count() {
  size_t n = 0;
  for (const CallbackSite& site : kCallbackSites) n += site.domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  return n;
}

// Every runtime site, each once, with `enable`; no driver site.
void expect_runtime_sites_set(uint32_t enable) {
  ASSERT_EQ(g_calls.size(), runtime_site_count());
  size_t i = 0;
  for (const CallbackSite& site : kCallbackSites) {
    if (site.domain != CUPTI_CB_DOMAIN_RUNTIME_API) continue;
    EXPECT_EQ(g_calls[i].enable, enable) << site.name;
    EXPECT_EQ(g_calls[i].domain, CUPTI_CB_DOMAIN_RUNTIME_API) << site.name;
    EXPECT_EQ(g_calls[i].cbid, site.cbid) << site.name;
    ++i;
  }
  g_calls.clear();
}

CUpti_CallbackData runtime_data(CUpti_ApiCallbackSite where, uint32_t correlation_id) {
  CUpti_CallbackData data{};
  data.callbackSite = where;
  data.correlationId = correlation_id;
  return data;
}

class RuntimeNamingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv(schema::env::kCuptiRuntimeCallbacks);
    table_.cuptiEnableCallback = record_enable;
    g_calls.clear();
  }
  void start() { start_runtime_naming(&table_, reinterpret_cast<CUpti_SubscriberHandle>(0x1)); }
  void enter(CUpti_CallbackId cbid, uint32_t id) { on_runtime(cbid, runtime_data(CUPTI_API_ENTER, id), true); }
  void leave(CUpti_CallbackId cbid, uint32_t id) { on_runtime(cbid, runtime_data(CUPTI_API_EXIT, id), true); }

  CuptiTable table_;
};

TEST_F(RuntimeNamingTest, OffOnceHooksNameAnAllocationOnAgainForGoodAtTheFirstUnnamedOne) {
  start();
  // Unnamed allocations before any hook named one change nothing: a static cudart needs the callbacks.
  enter(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 7);
  EXPECT_EQ(runtime_call_in_progress(), Api::cudaMalloc);
  note_allocation(false);
  EXPECT_TRUE(g_calls.empty());

  // A hook named one: every runtime site is disabled, and the entry seen before is stale (its exit may never
  // come), so it names nothing any more.
  note_allocation(true);
  expect_runtime_sites_set(0);
  EXPECT_EQ(runtime_call_in_progress(), Api::Unknown);
  note_allocation(true);
  EXPECT_TRUE(g_calls.empty());
  enter(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, 8);  // raised while the switch-off was under way
  EXPECT_EQ(runtime_call_in_progress(), Api::Unknown);

  // An allocation nobody named: on again; the stale entry does not block the next one.
  note_allocation(false);
  expect_runtime_sites_set(1);
  enter(CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020, 9);
  EXPECT_EQ(runtime_call_in_progress(), Api::cudaMallocAsync);
  enter(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 10);  // nested: the outermost call names
  EXPECT_EQ(runtime_call_in_progress(), Api::cudaMallocAsync);
  leave(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 10);
  EXPECT_EQ(runtime_call_in_progress(), Api::cudaMallocAsync);
  leave(CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020, 9);
  EXPECT_EQ(runtime_call_in_progress(), Api::Unknown);

  // And it stays on, whatever comes next.
  note_allocation(true);
  note_allocation(false);
  EXPECT_TRUE(g_calls.empty());
}

TEST_F(RuntimeNamingTest, ForcedOnByTheEnvironmentNeverSwitches) {
  setenv(schema::env::kCuptiRuntimeCallbacks, "1", 1);
  start();
  note_allocation(true);
  note_allocation(false);
  note_allocation(true);
  EXPECT_TRUE(g_calls.empty());
  enter(CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020, 3);
  EXPECT_EQ(runtime_call_in_progress(), Api::cudaHostAlloc);
  leave(CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020, 3);
  EXPECT_EQ(runtime_call_in_progress(), Api::Unknown);
}

TEST_F(RuntimeNamingTest, EntriesInsideOurOwnCodeAndUnmatchedExitsNameNothing) {
  start();
  on_runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, runtime_data(CUPTI_API_ENTER, 4), /*active=*/false);
  EXPECT_EQ(runtime_call_in_progress(), Api::Unknown);
  enter(CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000, 5);
  leave(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 4);  // an exit whose entry we did not keep
  EXPECT_EQ(runtime_call_in_progress(), Api::cudaMallocManaged);
  leave(CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000, 5);
  EXPECT_EQ(runtime_call_in_progress(), Api::Unknown);
}

}  // namespace
}  // namespace gmt::cupti
