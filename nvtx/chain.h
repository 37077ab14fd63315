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
#include <cstdint>

namespace gmt::nvtx {

// The callbacks we handle. Every other one (names of threads and categories, resources, the CUDA, CUDART,
// OpenCL and sync modules, nvtxInitialize, nvtxDomainDestroy) keeps whatever the chained tool installed.
enum class Callback : unsigned {
  MarkEx,
  MarkA,
  MarkW,
  RangeStartEx,
  RangeStartA,
  RangeStartW,
  RangeEnd,
  RangePushEx,
  RangePushA,
  RangePushW,
  RangePop,  // NVTX_CB_MODULE_CORE
  DomainMarkEx,
  DomainRangeStartEx,
  DomainRangeEnd,
  DomainRangePushEx,
  DomainRangePop,
  DomainRegisterStringA,
  DomainRegisterStringW,
  DomainCreateA,
  DomainCreateW,  // NVTX_CB_MODULE_CORE2
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

// NVTX's memory extension (module NVTX_EXT_MODULEID_MEM, nvtx3/nvToolsExtMem.h): the function slots we fill
// (nvtx/memory.cpp). An extension module has no callback table: NVTX hands the tool an array of function slots,
// indexed by NVTX3EXT_CBID_*, in InitializeInjectionNvtxExtension (nvtx/injection.cpp). Every other slot of the
// module (names, permissions, the CUDA-runtime part) keeps whatever the chained tool installed.
enum class MemCallback : unsigned {
  HeapRegister,
  HeapUnregister,
  HeapReset,
  RegionsRegister,
  RegionsResize,
  RegionsUnregister,
  Count
};
inline constexpr unsigned kMemCallbacks = static_cast<unsigned>(MemCallback::Count);

struct HandledSlot {
  unsigned slot;     // NVTX3EXT_CBID_*
  intptr_t handler;  // ours
};
// Indexed by MemCallback.
const HandledSlot* handled_memory_slots();

// The chained tool's functions for those slots, read back after its InitializeInjectionNvtxExtension filled a
// copy's memory module; 0 where it installed nothing. Set once, like g_chain.
struct MemChain {
  intptr_t fn[kMemCallbacks] = {};

  template <typename F>
  F get(MemCallback c) const {
    return reinterpret_cast<F>(fn[static_cast<unsigned>(c)]);
  }
};
extern std::atomic<const MemChain*> g_mem_chain;
inline const MemChain* mem_chain() { return g_mem_chain.load(std::memory_order_acquire); }

}  // namespace gmt::nvtx
