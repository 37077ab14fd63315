// The NVTX callbacks we take over in every NVTX copy of the process, and the tool we chain to: another
// injection library that was in NVTX_INJECTION64_PATH before us (e.g. Nsight Systems; `gpumemtrace run` passes
// its path in GMT_NVTX_CHAIN). Internal to nvtx/.
//
// Only the NVTX types are needed here: NVTX_NO_IMPL leaves the NVTX implementation out of the capture code
// (nvtx/emit.cpp holds this library's one NVTX copy, for emitting).
#pragma once

#ifndef NVTX_NO_IMPL
#define NVTX_NO_IMPL
#endif
#include <nvtx3/nvToolsExt.h>

#include <atomic>

namespace gmt::nvtx {

// The callbacks we handle. Every other one (names of threads and categories, resources, the CUDA, CUDART,
// OpenCL and sync modules, nvtxInitialize, nvtxDomainDestroy) keeps whatever the chained tool installed.
enum class Callback : unsigned {
  MarkEx, MarkA, MarkW, RangeStartEx, RangeStartA, RangeStartW, RangeEnd, RangePushEx, RangePushA, RangePushW,
  RangePop,  // NVTX_CB_MODULE_CORE
  DomainMarkEx, DomainRangeStartEx, DomainRangeEnd, DomainRangePushEx, DomainRangePop, DomainRegisterStringA,
  DomainRegisterStringW, DomainCreateA, DomainCreateW,  // NVTX_CB_MODULE_CORE2
  Count
};
inline constexpr unsigned kCallbacks = static_cast<unsigned>(Callback::Count);

struct HandledCallback {
  NvtxCallbackModule module;
  unsigned id;                  // NVTX_CBID_CORE_* / NVTX_CBID_CORE2_*
  NvtxFunctionPointer handler;  // ours (nvtx/handlers.cpp)
};
// Indexed by Callback.
const HandledCallback* handled_callbacks();

// The chained tool's pointers for the callbacks we handle, read back from an NVTX copy's tables after the
// tool's InitializeInjectionNvtx2 filled them; null where it installed nothing.
struct Chain {
  NvtxFunctionPointer fn[kCallbacks] = {};

  template <typename F>
  F get(Callback c) const {
    return reinterpret_cast<F>(fn[static_cast<unsigned>(c)]);
  }
  bool has(Callback c) const { return fn[static_cast<unsigned>(c)] != nullptr; }
};

// The chain every handler forwards to; null when there is none (the common case). Set once, by the first
// NVTX copy whose chained initialization succeeded, before our handlers are installed in that copy.
extern std::atomic<const Chain*> g_chain;
inline const Chain* chain() { return g_chain.load(std::memory_order_acquire); }

}  // namespace gmt::nvtx
