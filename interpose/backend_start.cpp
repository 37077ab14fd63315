#include "interpose/backend_start.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "cupti/cupti_backend.h"
#include "interpose/backend_choice.h"
#include "interpose/hooks_reach.h"
#include "recorder/backend.h"
#include "recorder/cache_hints.h"
#include "recorder/recorder.h"
#include "recorder/settings.h"
#include "recorder/stacks.h"

namespace gmt::interpose {
namespace {

using recorder::Backend;
using recorder::BackendRequest;

// Without a driver below the runtime (the simulated runtime, or a machine with no NVIDIA driver) no
// driver-level backend can see anything: count at the runtime level instead.
bool driver_present() {
  if (recorder::settings().simulated) return false;
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!driver) driver = dlopen("libcuda.so.1", RTLD_LAZY);
  if (!driver) return false;
  dlclose(driver);
  return true;
}

// Gathers what the choice depends on (only what it needs: no driver probe under the runtime backend) and sets it.
void decide() {
  BackendInputs inputs;
  inputs.request = recorder::requested_backend();
  inputs.verify = recorder::verify_requested();
  inputs.simulated = recorder::settings().simulated;
  if (!inputs.simulated && inputs.request != BackendRequest::Runtime) {
    inputs.driver_present = driver_present();
    if (inputs.driver_present) inputs.hooks = judge_hooks_reach(probe_hooks_reach());
  }
  recorder::set_backend_decision(choose_backend(inputs, [](std::string& why) { return cupti::start(why); }));
}

// Driver-level backends take stacks inside libcuda and CUPTI: cut those frames.
void decide_and_prepare_stacks() {
  decide();
  if (recorder::driver_level_backend()) recorder::skip_cuda_library_frames();
}

}  // namespace

static_assert(static_cast<int>(Backend::Undecided) == 0, "ensure_backend_started (backend_start.h) tests for 0");

// The first hook's work, kept out of the per-call check (ensure_backend_started, backend_start.h).
GMT_COLD void start_backend() {
  static std::mutex mutex;  // other threads wait until the first one has decided
  std::lock_guard lock(mutex);
  if (recorder::active_backend() != Backend::Undecided) return;
  t_deciding_backend = true;
  decide_and_prepare_stacks();
  t_deciding_backend = false;
  // run --paused: the process's first CUDA call opens its trace and control channel, recording still paused.
  if (recorder::settings().start_paused) recorder::begin_paused_start();
}

}  // namespace gmt::interpose

// The driver loads CUDA_INJECTION64_PATH (gpumemtrace run points it at this library) at cuInit and calls
// this, before the app's first driver call returns: the earliest moment CUPTI can be started.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  gmt::interpose::ensure_backend_started();
  return 1;
}
