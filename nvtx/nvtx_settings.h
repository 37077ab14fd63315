// What `gpumemtrace run` tells nvtx/ (environment variables, read in the profiled process). Documented in
// docs/trace-format.md and `gpumemtrace run --help`.
#pragma once

#include <cstdint>

namespace gmt::nvtx {

// The variables' names: schema/environment.h (GMT_NVTX_CHAIN, GMT_NVTX_EMIT, GMT_NVTX_PEAK_STEP).

// The peak step when GMT_NVTX_PEAK_STEP is not set.
inline constexpr uint64_t kDefaultPeakStep = uint64_t{1} << 30;

// Called by nvtx/injection.cpp once a chained tool is initialized (see nvtx/emit.cpp for why).
void on_chain_ready();

}  // namespace gmt::nvtx
