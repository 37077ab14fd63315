// What `gpumemtrace run` tells nvtx/ (environment variables, read in the profiled process). Documented in
// docs/trace-format.md and `gpumemtrace run --help`.
#pragma once

#include <cstdint>

namespace gmt::nvtx {

// The NVTX injection library that NVTX_INJECTION64_PATH named before `run` pointed it at us (e.g. Nsight
// Systems): loaded and initialized by us, for every NVTX copy, and handed every call (chaining).
inline constexpr const char* kEnvChain = "GMT_NVTX_CHAIN";
// "1": emit gpumemtrace's own markers and ranges in the NVTX domain "gpumemtrace" (run --nvtx-emit).
inline constexpr const char* kEnvEmit = "GMT_NVTX_EMIT";
// Bytes: a marker each time live bytes pass a new multiple of this (run --nvtx-peak-step; 0: none).
inline constexpr const char* kEnvPeakStep = "GMT_NVTX_PEAK_STEP";
inline constexpr uint64_t kDefaultPeakStep = uint64_t{1} << 30;

// Called by nvtx/injection.cpp once a chained tool is initialized (see nvtx/emit.cpp for why).
void on_chain_ready();

}  // namespace gmt::nvtx
