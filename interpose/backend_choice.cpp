#include "interpose/backend_choice.h"

#include "schema/trace_schema.h"

namespace gmt::interpose {
namespace {

using recorder::Backend;
using recorder::BackendDecision;
using recorder::BackendRequest;
namespace reasons = schema::backend_reasons;

std::string basename_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// glibc's own dlsym: in libc.so.6 since 2.34, in libdl.so.2 before.
bool is_libc(const std::string& path) {
  const std::string name = basename_of(path);
  return name.rfind("libc.so", 0) == 0 || name.rfind("libc-", 0) == 0 || name.rfind("libdl.so", 0) == 0 ||
         name.rfind("libdl-", 0) == 0;
}

// The cross-check of run --verify is the other driver-level backend.
void add_cross_check(BackendDecision& decision, const BackendInputs& inputs, const CuptiStarter& start_cupti,
                     const std::string& cupti_failure) {
  if (!inputs.verify) return;
  if (decision.backend == Backend::Cupti) {
    decision.cross_check = Backend::DriverHooks;  // always there: the wrappers record wherever they are reached
    return;
  }
  if (decision.backend == Backend::DriverHooks) {
    std::string why = cupti_failure;
    if (why.empty() && start_cupti(why)) {
      decision.cross_check = Backend::Cupti;
      return;
    }
    decision.cross_check_unavailable = why;
    return;
  }
  // The runtime hooks: no second path exists below them.
  decision.cross_check_unavailable =
      decision.reason == std::string(reasons::kSimulated)
          ? "the simulated CUDA runtime has no driver below it, so there is no second backend to compare with"
      : decision.reason == std::string(reasons::kNoDriver)
          ? "no CUDA driver here (libcuda.so.1), so there is no second backend to compare with"
          : "--backend runtime counts at the runtime level only, where there is no second backend to compare with";
}

}  // namespace

HooksReach judge_hooks_reach(const HooksReachFacts& facts) {
  if (facts.wrapper_handed_out) return {true, ""};
  if (facts.dlsym_is_ours) {
    return {false, "the process's dlsym is gpumemtrace's, yet it handed out libcuda's own entry point: the driver "
                   "library was not recognized, so its functions cannot be wrapped"};
  }
  if (facts.dlsym_owner.empty()) {
    return {false, "the process's dlsym could not be found, so no driver entry point can be wrapped"};
  }
  if (is_libc(facts.dlsym_owner)) {
    return {false, "gpumemtrace's library was not preloaded into this process (LD_PRELOAD was dropped, or the "
                   "library came in only through CUDA_INJECTION64_PATH or dlopen), so the driver's entry points "
                   "are not looked up through its hooks"};
  }
  return {false, "another library's dlsym comes before gpumemtrace's in this process (" + facts.dlsym_owner +
                     "), so the driver's entry points are not looked up through its hooks"};
}

BackendDecision choose_backend(const BackendInputs& inputs, const CuptiStarter& start_cupti) {
  BackendDecision decision;
  if (inputs.simulated) {
    decision.backend = Backend::Runtime;
    decision.reason = reasons::kSimulated;
  } else if (inputs.request == BackendRequest::Runtime) {
    decision.backend = Backend::Runtime;
    decision.reason = reasons::kRequested;
  } else if (!inputs.driver_present) {
    decision.backend = Backend::Runtime;
    decision.reason = reasons::kNoDriver;
    // auto says nothing: a process without a driver (a CPU-only tool of the run) is no surprise.
    if (inputs.request != BackendRequest::Auto) {
      decision.note = "no CUDA driver here (libcuda.so.1): counting at the runtime level";
    }
  }
  if (decision.backend == Backend::Runtime) {
    add_cross_check(decision, inputs, start_cupti, "");
    return decision;
  }

  const bool auto_choice = inputs.request == BackendRequest::Auto;
  const bool wants_cupti = inputs.request == BackendRequest::Cupti || (auto_choice && !inputs.hooks.bound);
  std::string cupti_failure;
  if (wants_cupti) {
    if (start_cupti(cupti_failure)) {
      decision.backend = Backend::Cupti;
      decision.reason = auto_choice ? reasons::kHooksCannotBind : reasons::kRequested;
      if (auto_choice) {
        decision.note = "the driver hooks cannot see this process's allocations: " + inputs.hooks.why_not +
                        "; counting with CUPTI instead";
      }
    } else {
      decision.backend = Backend::DriverHooks;
      if (inputs.hooks.bound) {
        decision.reason = reasons::kCuptiUnavailable;
        decision.note = cupti_failure + "; using the driver entry-point hooks instead (--backend hooks)";
      } else {
        decision.reason = reasons::kNeitherBinds;
        decision.note = "warning: " + cupti_failure +
                        ", and the driver hooks cannot see this process's "
                        "allocations either (" +
                        inputs.hooks.why_not +
                        "): counting with the hooks, so "
                        "allocations may be missing from this trace";
      }
    }
  } else {
    decision.backend = Backend::DriverHooks;
    decision.reason = auto_choice ? reasons::kHooksBind : reasons::kRequested;
    if (!inputs.hooks.bound) {
      decision.note =
          "warning: --backend hooks: the driver hooks may miss this process's allocations: " + inputs.hooks.why_not +
          " (--backend cupti sees them)";
    }
  }
  add_cross_check(decision, inputs, start_cupti, cupti_failure);
  return decision;
}

}  // namespace gmt::interpose
