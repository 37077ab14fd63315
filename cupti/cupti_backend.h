// The CUPTI backend's entry points for the rest of the preload library.
#pragma once

#include <string>

namespace gmt::cupti {

// Loads libcupti (dlopen: the preload library never links it, so processes that never use CUDA never load
// it), subscribes, and enables the driver-API callbacks for every allocation, free, pool and VMM call.
// Returns false, with `why` set to a sentence for the user, when CUPTI cannot be had (library missing,
// another tool holds the one subscriber slot, a sandbox refuses it); nothing is left half-enabled then.
bool start(std::string& why);

// Flushes CUPTI activity buffers (pool records) before the trace is closed. Safe to call when not started.
void flush();

}  // namespace gmt::cupti
