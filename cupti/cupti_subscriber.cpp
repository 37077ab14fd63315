// Starting the CUPTI backend: load libcupti, take CUPTI's one subscriber slot, enable the callback ids of
// cupti_callbacks.h (runtime_naming.h may later switch the runtime ones off and on again). All or nothing:
// any failure after subscribing disables what was enabled, in reverse order, and unsubscribes, so the
// fallback backend runs in a process CUPTI no longer calls into.
//
// No activity kinds are enabled in this version: the callbacks see every call synchronously (with its
// stack), which is all the trace needs. flush() is therefore a no-op until an activity kind is added.
#include <cupti.h>

#include <atomic>
#include <cctype>
#include <cstring>
#include <iterator>
#include <string>

#include "cupti/cupti_backend.h"
#include "cupti/cupti_callbacks.h"
#include "cupti/cupti_loader.h"
#include "cupti/runtime_naming.h"
#include "recorder/backend.h"

namespace gmt::cupti {
namespace {

// Written only by start() (serialized by its caller, interpose/backend_start.cpp).
CUpti_SubscriberHandle g_subscriber = nullptr;
std::atomic<bool> g_started{false};
// Set by start() when it enables activity kinds (none in this version): then flush() has buffers to drain.
std::atomic<bool> g_activity_enabled{false};

constexpr size_t kSiteCount = std::size(kCallbackSites);

// The mirror of enable_sites: disables the first `enabled` sites in reverse order, then unsubscribes.
// Failures are reported (once, on stderr) but do not stop the teardown.
void teardown(const CuptiTable* table, size_t enabled) {
  for (size_t i = enabled; i-- > 0;) {
    const CallbackSite& site = kCallbackSites[i];
    GMT_CUPTI_CALL(table, nullptr, cuptiEnableCallback, 0, g_subscriber, site.domain, site.cbid);
  }
  GMT_CUPTI_CALL(table, nullptr, cuptiUnsubscribe, g_subscriber);
  g_subscriber = nullptr;
}

// The other tool's name as CUPTI reported it, made safe to print and store. Empty when CUPTI does not know
// it: seen on the H200, compute-sanitizer is reported as "<not provided>" and a plain cuptiSubscribe
// client as "CUPTI for <not provided>", which tell the user nothing.
std::string holder_name(const char* text, size_t capacity) {
  std::string out;
  for (size_t i = 0; i < capacity && text[i]; ++i) {
    unsigned char ch = static_cast<unsigned char>(text[i]);
    out += std::isprint(ch) ? static_cast<char>(ch) : '?';
  }
  if (out.find("<not provided>") != std::string::npos) out.clear();
  return out;
}

bool subscribe(const CuptiTable* table, std::string& why) {
  std::string error;
  // cuptiSubscribe_v2 names the tool that already holds CUPTI (Nsight Systems, Nsight Compute,
  // compute-sanitizer, or an app's own profiler): worth a line in the user's message.
  char holder[128] = {};
  CUptiResult result = CUPTI_ERROR_NOT_INITIALIZED;
  if (table->cuptiSubscribe_v2) {
    CUpti_SubscriberParams params;
    std::memset(&params, 0, sizeof params);
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "gpumemtrace";
    params.oldSubscriberName = holder;
    params.oldSubscriberSize = sizeof holder;
    result = GMT_CUPTI_CALL(table, &error, cuptiSubscribe_v2, &g_subscriber, on_callback, nullptr, &params);
  }
  if (result != CUPTI_SUCCESS && result != CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    // No _v2, or one that refused our parameters: the plain call subscribes just the same.
    error.clear();
    holder[0] = '\0';
    result = GMT_CUPTI_CALL(table, &error, cuptiSubscribe, &g_subscriber, on_callback, nullptr);
  }
  if (result == CUPTI_SUCCESS) return true;

  g_subscriber = nullptr;
  if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    std::string name = holder_name(holder, sizeof holder - 1);
    why = "CUPTI is held by another tool" + (name.empty() ? std::string() : ": " + name) +
          " (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)";
  } else {
    why = "CUPTI cannot be used: " + error + " [" + table->path + "]";
  }
  return false;
}

// Enables every site of the table in order; on the first failure undoes everything (teardown) and says
// which id failed.
bool enable_sites(const CuptiTable* table, std::string& why) {
  for (size_t i = 0; i < kSiteCount; ++i) {
    const CallbackSite& site = kCallbackSites[i];
    std::string error;
    if (GMT_CUPTI_CALL(table, &error, cuptiEnableCallback, 1, g_subscriber, site.domain, site.cbid) != CUPTI_SUCCESS) {
      teardown(table, i);
      why = std::string("CUPTI cannot be used: enabling the ") + site.name + " callback: " + error + " [" +
            table->path + "]";
      return false;
    }
  }
  return true;
}

// The capture switch of recorder/backend.h: the driver-API sites off while recording is paused, on again after
// (the runtime-API sites stay as runtime_naming.h set them). A failure is said once on stderr by GMT_CUPTI_CALL;
// recording itself never depends on it: a paused hook records nothing either way.
void switch_driver_callbacks(bool on) {
  const CuptiTable* table = cupti_table();
  if (!table || !g_subscriber) return;
  switch_sites_of_domain(table, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, on);
}

}  // namespace

bool start(std::string& why) {
  if (g_started.load(std::memory_order_acquire)) return true;
  CuptiTable* table = load_cupti(why);
  if (!table) return false;
  if (!subscribe(table, why)) return false;
  if (!enable_sites(table, why)) return false;
  start_runtime_naming(table, g_subscriber);
  // Callbacks may already run on other threads, but they record nothing (and read no table) until the
  // backend is set after we return, so the table can still be completed here.
  resolve_driver_functions(*table);
  publish_table(table);
  recorder::set_capture_switch(switch_driver_callbacks);
  g_started.store(true, std::memory_order_release);
  return true;
}

void flush() {
  if (!g_started.load(std::memory_order_acquire) || !g_activity_enabled.load(std::memory_order_acquire)) return;
  GMT_CUPTI_CALL(cupti_table(), nullptr, cuptiActivityFlushAll, 0);
}

}  // namespace gmt::cupti
