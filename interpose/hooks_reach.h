// Whether the driver hooks see this process's allocations, found out the way cudart would: through the process's
// own dlsym (the first definition in its global scope), ask libcuda's handle for a driver function we wrap. Our
// wrapper comes back exactly when our dlsym is the process's (the library was preloaded and nothing interposes
// dlsym before it without passing on to ours); cudart then gets cuGetProcAddress, and through it every entry point,
// from our hooks (shared/FACTS.md). interpose/backend_choice.h judges the answer.
#pragma once

#include "interpose/backend_choice.h"

namespace gmt::interpose {

// Call only where libcuda.so.1 can be loaded (it is opened, without RTLD_GLOBAL, if the app has not loaded it
// yet). Makes dlsym, dlopen and dladdr calls: not for dlsym's own path.
HooksReachFacts probe_hooks_reach();

}  // namespace gmt::interpose
