// libcupti, loaded at run time: the preload library never links it (a process that never starts CUDA must
// not pay for it, and `ldd libgpumemtrace.so` must not need a toolkit). Every CUPTI entry point we call is
// resolved once into one table, and every call goes through GMT_CUPTI_CALL (docs/design.md, "Backends": cupti),
// which turns a failure into a sentence naming the call, file, line and CUPTI's own text, and never aborts.
#pragma once

#include <cuda.h>
#include <cupti.h>

#include <atomic>
#include <string>

namespace gmt::cupti {

// The CUPTI entry points we use (each field is named after its function, so GMT_CUPTI_CALL can name it),
// plus the one driver call the callbacks make. Filled once by load_cupti(), then never written again.
struct CuptiTable {
  void* library = nullptr;  // the dlopen handle; never closed (CUPTI keeps threads and atexit handlers)
  std::string path;         // where libcupti was found, for messages

  // Required: start() fails, saying which, when one is missing.
  decltype(&::cuptiGetResultString) cuptiGetResultString = nullptr;
  decltype(&::cuptiSubscribe) cuptiSubscribe = nullptr;
  decltype(&::cuptiUnsubscribe) cuptiUnsubscribe = nullptr;
  decltype(&::cuptiEnableCallback) cuptiEnableCallback = nullptr;
  decltype(&::cuptiGetDeviceId) cuptiGetDeviceId = nullptr;

  // Optional: used when present.
  decltype(&::cuptiSubscribe_v2) cuptiSubscribe_v2 = nullptr;  // names the tool that holds CUPTI (12.x+)
  decltype(&::cuptiActivityFlushAll) cuptiActivityFlushAll = nullptr;

  // From the driver (libcuda.so.1, already loaded by the app), for out-of-memory forensics. Optional.
  CUresult (*cuMemGetInfo_v2)(size_t* free_bytes, size_t* total_bytes) = nullptr;
};

// Loads libcupti and resolves the table: GMT_CUPTI_LIBRARY (a full path, set by the CLI) first, then
// "libcupti.so.13", "libcupti.so.12", then "libcupti.so"; a libcupti.so.13 or .12 the app already loaded
// (PyTorch's profiler links one) is reused rather than loading a second copy. Returns the table, or nullptr
// with `why` set. Not thread-safe: only start() calls it, serialized by its caller. Later calls return the same table.
CuptiTable* load_cupti(std::string& why);

// Resolves cuMemGetInfo_v2 from an already loaded libcuda.so.1 (never loads the driver itself). Called by
// start() after subscribing, when CUPTI has surely loaded the driver; before the table is published.
void resolve_driver_functions(CuptiTable& table);

// The table the callbacks use: published by start() once everything is enabled; nullptr before. The
// callbacks read it with one acquire load, from any thread.
void publish_table(const CuptiTable* table);
const CuptiTable* cupti_table();

// Called by GMT_CUPTI_CALL only when a call failed. Builds
//   "cuptiSubscribe failed (cupti/cupti_subscriber.cpp:57): CUPTI_ERROR_... (39)"
// and stores it in *why when given (the caller reports it); without `why`, writes it once per call site to
// stderr (`reported` is that site's flag), so a failing call in a hot callback cannot flood the output.
// Never calls CUPTI except cuptiGetResultString (directly: the wrapper does not recurse), never throws.
// `missing`: the entry point is absent from this libcupti (the call was never made).
void report_failure(const CuptiTable* table, CUptiResult result, bool missing, const char* call, const char* file,
                    int line, std::string* why, std::atomic<bool>& reported);

}  // namespace gmt::cupti

// GMT_CUPTI_CALL(table, why, cuptiFunction, args...) -> CUptiResult
// `table` is a const CuptiTable* (may be null), `why` a std::string* or nullptr. A missing entry point reads
// as CUPTI_ERROR_NOT_INITIALIZED (and is reported as missing), so a call through an absent optional
// function fails cleanly instead of jumping to null.
#define GMT_CUPTI_CALL(table, why, fn, ...)                                                               \
  ([&]() -> CUptiResult {                                                                                 \
    static std::atomic<bool> gmt_reported_{false};                                                        \
    const ::gmt::cupti::CuptiTable* gmt_table_ = (table);                                                 \
    const bool gmt_missing_ = !gmt_table_ || !gmt_table_->fn;                                             \
    CUptiResult gmt_result_ = gmt_missing_ ? CUPTI_ERROR_NOT_INITIALIZED : gmt_table_->fn(__VA_ARGS__);   \
    if (gmt_result_ != CUPTI_SUCCESS)                                                                     \
      ::gmt::cupti::report_failure(gmt_table_, gmt_result_, gmt_missing_, #fn, __FILE__, __LINE__, (why), \
                                   gmt_reported_);                                                        \
    return gmt_result_;                                                                                   \
  }())

namespace gmt::cupti {

// Enables (`on`) or disables every site of cupti_callbacks.h's list in `domain` for `subscriber`: the runtime
// sites when runtime_naming.h switches phase, the driver sites around a benchmark pause. A failure is said once
// on stderr (GMT_CUPTI_CALL); the other sites are still switched.
void switch_sites_of_domain(const CuptiTable* table, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain,
                            bool on);

}  // namespace gmt::cupti
