// interpose/backend_choice.h: which backend counts, why, what the process says once on stderr, and whether run
// --verify's cross-check runs, for every combination of request, driver, hooks and CUPTI. The CUPTI starter is a
// fake that counts its calls, so the tests also show when libcupti is never touched (the hooks alone).
#include <gtest/gtest.h>

#include <string>

#include "interpose/backend_choice.h"
#include "schema/trace_schema.h"

namespace gmt::interpose {
namespace {

using recorder::Backend;
using recorder::BackendDecision;
using recorder::BackendRequest;
namespace reasons = schema::backend_reasons;

const char* const kHeld = "CUPTI is held by another tool (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)";

HooksReach bound() { return {true, ""}; }
HooksReach not_preloaded() { return judge_hooks_reach({false, false, "/usr/lib/x86_64-linux-gnu/libc.so.6"}); }

// A CUPTI that starts or is held by another tool, and counts how often it was asked.
struct FakeCupti {
  bool available = true;
  int starts = 0;
  CuptiStarter starter() {
    return [this](std::string& why) {
      ++starts;
      if (!available) why = kHeld;
      return available;
    };
  }
};

BackendInputs on_driver(BackendRequest request, HooksReach hooks, bool verify = false) {
  BackendInputs inputs;
  inputs.request = request;
  inputs.driver_present = true;
  inputs.hooks = hooks;
  inputs.verify = verify;
  return inputs;
}

TEST(BackendChoice, AutoCountsWithTheHooksWhereTheyBindAndNeverLoadsCupti) {
  FakeCupti cupti;
  BackendDecision d = choose_backend(on_driver(BackendRequest::Auto, bound()), cupti.starter());
  EXPECT_EQ(d.backend, Backend::DriverHooks);
  EXPECT_EQ(d.reason, reasons::kHooksBind);
  EXPECT_EQ(d.note, "");  // the default says nothing
  EXPECT_EQ(d.cross_check, Backend::Undecided);
  EXPECT_EQ(cupti.starts, 0);
}

TEST(BackendChoice, AutoFallsBackToCuptiWhereTheHooksCannotSeeAndSaysWhy) {
  FakeCupti cupti;
  BackendDecision d = choose_backend(on_driver(BackendRequest::Auto, not_preloaded()), cupti.starter());
  EXPECT_EQ(d.backend, Backend::Cupti);
  EXPECT_EQ(d.reason, reasons::kHooksCannotBind);
  EXPECT_EQ(d.note,
            "the driver hooks cannot see this process's allocations: gpumemtrace's library was not preloaded into "
            "this process (LD_PRELOAD was dropped, or the library came in only through CUDA_INJECTION64_PATH or "
            "dlopen), so the driver's entry points are not looked up through its hooks; counting with CUPTI instead");
  EXPECT_EQ(cupti.starts, 1);
}

TEST(BackendChoice, AutoKeepsTheHooksWhenAnotherToolHoldsCupti) {
  // Under compute-sanitizer or Nsight: CUPTI is never even asked for while the hooks bind.
  FakeCupti cupti{.available = false};
  BackendDecision d = choose_backend(on_driver(BackendRequest::Auto, bound()), cupti.starter());
  EXPECT_EQ(d.backend, Backend::DriverHooks);
  EXPECT_EQ(d.reason, reasons::kHooksBind);
  EXPECT_EQ(d.note, "");
  EXPECT_EQ(cupti.starts, 0);
}

TEST(BackendChoice, AutoWithNeitherPathWarnsThatAllocationsMayBeMissing) {
  FakeCupti cupti{.available = false};
  BackendDecision d = choose_backend(on_driver(BackendRequest::Auto, not_preloaded()), cupti.starter());
  EXPECT_EQ(d.backend, Backend::DriverHooks);
  EXPECT_EQ(d.reason, reasons::kNeitherBinds);
  EXPECT_EQ(d.note.rfind(std::string("warning: ") + kHeld + ", and the driver hooks cannot see", 0), 0u) << d.note;
  EXPECT_NE(d.note.find("allocations may be missing from this trace"), std::string::npos) << d.note;
  EXPECT_EQ(cupti.starts, 1);
}

TEST(BackendChoice, RequestedCuptiFallsBackToTheHooksWhenHeld) {
  FakeCupti cupti{.available = false};
  BackendDecision d = choose_backend(on_driver(BackendRequest::Cupti, bound()), cupti.starter());
  EXPECT_EQ(d.backend, Backend::DriverHooks);
  EXPECT_EQ(d.reason, reasons::kCuptiUnavailable);
  EXPECT_EQ(d.note, std::string(kHeld) + "; using the driver entry-point hooks instead (--backend hooks)");
}

TEST(BackendChoice, RequestedBackendsAreUsedAsAsked) {
  FakeCupti cupti;
  BackendDecision d = choose_backend(on_driver(BackendRequest::Cupti, bound()), cupti.starter());
  EXPECT_EQ(d.backend, Backend::Cupti);
  EXPECT_EQ(d.reason, reasons::kRequested);
  EXPECT_EQ(d.note, "");
  d = choose_backend(on_driver(BackendRequest::Hooks, bound()), cupti.starter());
  EXPECT_EQ(d.backend, Backend::DriverHooks);
  EXPECT_EQ(d.reason, reasons::kRequested);
  EXPECT_EQ(d.note, "");
  EXPECT_EQ(cupti.starts, 1);  // only for --backend cupti
}

TEST(BackendChoice, RequestedHooksThatCannotSeeAreKeptWithAWarning) {
  FakeCupti cupti;
  BackendDecision d = choose_backend(on_driver(BackendRequest::Hooks, not_preloaded()), cupti.starter());
  EXPECT_EQ(d.backend, Backend::DriverHooks);
  EXPECT_EQ(d.reason, reasons::kRequested);
  EXPECT_EQ(d.note.rfind("warning: --backend hooks: the driver hooks may miss this process's allocations: "
                         "gpumemtrace's library was not preloaded",
                         0),
            0u)
      << d.note;
  EXPECT_EQ(cupti.starts, 0);
}

TEST(BackendChoice, WithoutADriverTheRuntimeHooksCount) {
  FakeCupti cupti;
  BackendInputs inputs;  // driver_present = false
  BackendDecision d = choose_backend(inputs, cupti.starter());
  EXPECT_EQ(d.backend, Backend::Runtime);
  EXPECT_EQ(d.reason, reasons::kNoDriver);
  EXPECT_EQ(d.note, "");  // auto: a CPU-only process of the run is no surprise
  inputs.request = BackendRequest::Hooks;
  d = choose_backend(inputs, cupti.starter());
  EXPECT_EQ(d.backend, Backend::Runtime);
  EXPECT_EQ(d.note, "no CUDA driver here (libcuda.so.1): counting at the runtime level");
  inputs.simulated = true;
  inputs.driver_present = true;  // the simulated runtime wins even where a driver is installed
  d = choose_backend(inputs, cupti.starter());
  EXPECT_EQ(d.backend, Backend::Runtime);
  EXPECT_EQ(d.reason, reasons::kSimulated);
  inputs = on_driver(BackendRequest::Runtime, bound());
  d = choose_backend(inputs, cupti.starter());
  EXPECT_EQ(d.backend, Backend::Runtime);
  EXPECT_EQ(d.reason, reasons::kRequested);
  EXPECT_EQ(cupti.starts, 0);
}

TEST(BackendChoice, VerifyAddsTheOtherDriverLevelBackend) {
  FakeCupti cupti;
  BackendDecision d = choose_backend(on_driver(BackendRequest::Auto, bound(), /*verify=*/true), cupti.starter());
  EXPECT_EQ(d.backend, Backend::DriverHooks);
  EXPECT_EQ(d.reason, reasons::kHooksBind);
  EXPECT_EQ(d.cross_check, Backend::Cupti);
  EXPECT_EQ(d.cross_check_unavailable, "");
  EXPECT_EQ(cupti.starts, 1);

  d = choose_backend(on_driver(BackendRequest::Cupti, bound(), true), cupti.starter());
  EXPECT_EQ(d.backend, Backend::Cupti);
  EXPECT_EQ(d.cross_check, Backend::DriverHooks);
  EXPECT_EQ(cupti.starts, 2);  // once per decision

  // Where the hooks cannot see, CUPTI counts and the hooks still cross-check: the report then shows what they miss.
  d = choose_backend(on_driver(BackendRequest::Auto, not_preloaded(), true), cupti.starter());
  EXPECT_EQ(d.backend, Backend::Cupti);
  EXPECT_EQ(d.cross_check, Backend::DriverHooks);
}

TEST(BackendChoice, VerifySaysWhyNoCrossCheckRuns) {
  FakeCupti held{.available = false};
  BackendDecision d = choose_backend(on_driver(BackendRequest::Auto, bound(), true), held.starter());
  EXPECT_EQ(d.backend, Backend::DriverHooks);
  EXPECT_EQ(d.cross_check, Backend::Undecided);
  EXPECT_EQ(d.cross_check_unavailable, kHeld);
  EXPECT_EQ(d.note, "");  // the counting backend is the default one: only the cross-check is missing

  // --backend cupti, held: the hooks count, and CUPTI is not asked a second time for the cross-check.
  d = choose_backend(on_driver(BackendRequest::Cupti, bound(), true), held.starter());
  EXPECT_EQ(d.backend, Backend::DriverHooks);
  EXPECT_EQ(d.cross_check_unavailable, kHeld);
  EXPECT_EQ(held.starts, 2);

  BackendInputs simulated;
  simulated.simulated = true;
  simulated.verify = true;
  d = choose_backend(simulated, held.starter());
  EXPECT_EQ(d.backend, Backend::Runtime);
  EXPECT_EQ(d.cross_check, Backend::Undecided);
  EXPECT_NE(d.cross_check_unavailable.find("simulated CUDA runtime has no driver"), std::string::npos);
}

TEST(HooksReach, BoundExactlyWhenTheProcessDlsymHandsOutOurWrapper) {
  EXPECT_TRUE(judge_hooks_reach({true, true, "/opt/gpumemtrace/lib/gpumemtrace/libgpumemtrace.so"}).bound);
  // An interposer preloaded before us that passes lookups on to ours is no obstacle.
  EXPECT_TRUE(judge_hooks_reach({true, false, "/opt/other/libinterposer.so"}).bound);
  EXPECT_EQ(judge_hooks_reach({true, false, "/opt/other/libinterposer.so"}).why_not, "");
}

TEST(HooksReach, NamesWhyTheHooksCannotSee) {
  // glibc's dlsym first (libc.so.6 since 2.34, libdl.so.2 before): the library was not preloaded.
  for (const char* libc : {"/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libdl.so.2"}) {
    HooksReach reach = judge_hooks_reach({false, false, libc});
    EXPECT_FALSE(reach.bound);
    EXPECT_EQ(reach.why_not.rfind("gpumemtrace's library was not preloaded into this process", 0), 0u) << libc;
  }
  HooksReach other = judge_hooks_reach({false, false, "/usr/lib/libvgpu.so"});
  EXPECT_FALSE(other.bound);
  EXPECT_EQ(other.why_not,
            "another library's dlsym comes before gpumemtrace's in this process (/usr/lib/libvgpu.so), so the "
            "driver's entry points are not looked up through its hooks");
  HooksReach ours = judge_hooks_reach({false, true, "/x/libgpumemtrace.so"});
  EXPECT_FALSE(ours.bound);
  EXPECT_NE(ours.why_not.find("driver library was not recognized"), std::string::npos);
  EXPECT_FALSE(judge_hooks_reach({}).bound);
}

}  // namespace
}  // namespace gmt::interpose
