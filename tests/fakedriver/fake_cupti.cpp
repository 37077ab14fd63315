// A TEST FIXTURE, not CUPTI: libcupti.so.13 with the entry points gpumemtrace's CUPTI backend requires
// (cupti/cupti_loader.cpp), one subscriber, and callbacks raised by the fake driver (fake_cuda.cpp) for the ids the
// subscriber enabled. With the fake driver it lets the CUPTI backend run end to end without a GPU.
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <set>
#include <utility>

#include "fake_driver.h"

namespace {

std::mutex g_mutex;
CUpti_CallbackFunc g_callback = nullptr;
void* g_userdata = nullptr;
std::set<std::pair<int, int>> g_enabled;  // (domain, cbid)
std::atomic<uint32_t> g_correlation{0};

void raise(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, CUpti_ApiCallbackSite site, const char* name,
           const void* params, CUresult* result, CUcontext context) {
  CUpti_CallbackFunc callback = nullptr;
  void* userdata = nullptr;
  {
    std::lock_guard lock(g_mutex);
    if (!g_callback || !g_enabled.count({domain, static_cast<int>(cbid)})) return;
    callback = g_callback;
    userdata = g_userdata;
  }
  thread_local uint32_t t_correlation = 0;
  if (site == CUPTI_API_ENTER) t_correlation = g_correlation.fetch_add(1) + 1;
  CUpti_CallbackData data{};
  data.callbackSite = site;
  data.functionName = name;
  data.functionParams = params;
  data.functionReturnValue = result;
  data.context = context;
  data.contextUid = static_cast<uint32_t>(gmt_fake_cuda_device_of_context(context) + 1);
  data.correlationId = t_correlation;
  callback(userdata, domain, cbid, &data);
}

}  // namespace

extern "C" {

CUptiResult cuptiGetResultString(CUptiResult result, const char** text) {
  if (!text) return CUPTI_ERROR_INVALID_PARAMETER;
  *text = result == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR (fake CUPTI)";
  return CUPTI_SUCCESS;
}

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata) {
  if (!subscriber || !callback) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard lock(g_mutex);
  if (g_callback) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  // The driver is loaded already (the app links it): hand it our raise function.
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  auto attach =
      driver ? reinterpret_cast<void (*)(GmtFakeCuptiRaise)>(dlsym(driver, "gmt_fake_cuda_attach_cupti")) : nullptr;
  if (!attach) return CUPTI_ERROR_NOT_INITIALIZED;
  attach(raise);
  g_callback = callback;
  g_userdata = userdata;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&g_callback);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle) {
  std::lock_guard lock(g_mutex);
  g_callback = nullptr;
  g_enabled.clear();
  return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain domain,
                                CUpti_CallbackId cbid) {
  std::lock_guard lock(g_mutex);
  if (enable) {
    g_enabled.insert({domain, static_cast<int>(cbid)});
  } else {
    g_enabled.erase({domain, static_cast<int>(cbid)});
  }
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetDeviceId(CUcontext context, uint32_t* device) {
  int ordinal = gmt_fake_cuda_device_of_context(context);
  if (!device || ordinal < 0) return CUPTI_ERROR_INVALID_CONTEXT;
  *device = static_cast<uint32_t>(ordinal);
  return CUPTI_SUCCESS;
}

}  // extern "C"
