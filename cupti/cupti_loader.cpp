#include "cupti/cupti_loader.h"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "cupti/cupti_callbacks.h"
#include "schema/environment.h"

namespace gmt::cupti {
namespace {

// Written only by load_cupti (start() is serialized by its caller); leaked on purpose: CUPTI may call our
// callback from any thread until the process ends, and the callbacks read this table.
CuptiTable* g_loaded = nullptr;
std::atomic<const CuptiTable*> g_published{nullptr};

// "cupti/cupti_subscriber.cpp" out of whatever path the compiler put in __FILE__.
const char* short_file(const char* file) {
  const char* last = std::strrchr(file, '/');
  if (!last) return file;
  const char* start = last;
  while (start > file && start[-1] != '/') --start;  // back to the start of the folder name
  return start;
}

void write_stderr(const std::string& line) {
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

// The CUPTI sonames we load, newest first: CUPTI 13 (the toolkit we build with) and 12 (CUDA 12 toolkits, PyPI's
// nvidia-cuda-cupti-cu12). The callback ids and parameter structs we use are the same in both (docs/design.md).
constexpr const char* kCuptiSonames[] = {"libcupti.so.13", "libcupti.so.12"};

// Tries, in order: a libcupti the process already has (sharing it avoids two CUPTI copies fighting over the driver's
// one tools slot), the CLI's GMT_CUPTI_LIBRARY, then the loader's search path.
void* open_library(std::string& errors) {
  // RTLD_LAZY with RTLD_NOLOAD: only look; do not change how the app's copy was bound.
  for (const char* soname : kCuptiSonames) {
    if (void* handle = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD)) return handle;
  }
  const char* env = std::getenv(schema::env::kCuptiLibrary);
  const char* candidates[] = {env && *env ? env : nullptr, kCuptiSonames[0], kCuptiSonames[1], "libcupti.so"};
  for (const char* candidate : candidates) {
    if (!candidate) continue;
    dlerror();  // clear any stale message
    // RTLD_NOW: a broken libcupti fails here, not at its first call inside a callback. RTLD_LOCAL: its
    // symbols never satisfy anyone else's lookups.
    if (void* handle = dlopen(candidate, RTLD_NOW | RTLD_LOCAL)) return handle;
    const char* error = dlerror();
    if (!errors.empty()) errors += "; ";
    errors += error ? error : candidate;
  }
  return nullptr;
}

std::string library_path(void* handle, const char* fallback) {
  struct link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) return map->l_name;
  return fallback;
}

template <typename Fn>
void resolve(void* library, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(library, name));
}

}  // namespace

CuptiTable* load_cupti(std::string& why) {
  if (g_loaded) return g_loaded;
  std::string errors;
  void* library = open_library(errors);
  if (!library) {
    why = "CUPTI cannot be used: libcupti could not be loaded (" + errors + "); set " + schema::env::kCuptiLibrary +
          " to its full path";
    return nullptr;
  }

  auto* table = new CuptiTable;
  table->library = library;
  table->path = library_path(library, "libcupti");

#define GMT_RESOLVE(name) resolve(library, #name, table->name)
  GMT_RESOLVE(cuptiGetResultString);
  GMT_RESOLVE(cuptiSubscribe);
  GMT_RESOLVE(cuptiUnsubscribe);
  GMT_RESOLVE(cuptiEnableCallback);
  GMT_RESOLVE(cuptiGetDeviceId);
  GMT_RESOLVE(cuptiSubscribe_v2);
  GMT_RESOLVE(cuptiActivityFlushAll);
#undef GMT_RESOLVE

  std::string missing;
  auto require = [&missing](const void* fn, const char* name) {
    if (fn) return;
    if (!missing.empty()) missing += ", ";
    missing += name;
  };
  require(reinterpret_cast<const void*>(table->cuptiGetResultString), "cuptiGetResultString");
  require(reinterpret_cast<const void*>(table->cuptiSubscribe), "cuptiSubscribe");
  require(reinterpret_cast<const void*>(table->cuptiUnsubscribe), "cuptiUnsubscribe");
  require(reinterpret_cast<const void*>(table->cuptiEnableCallback), "cuptiEnableCallback");
  require(reinterpret_cast<const void*>(table->cuptiGetDeviceId), "cuptiGetDeviceId");
  if (!missing.empty()) {
    why = "CUPTI cannot be used: " + table->path + " lacks " + missing;
    // The library stays loaded (its constructors ran; unloading buys nothing and risks dangling handlers).
    delete table;
    return nullptr;
  }
  g_loaded = table;
  return table;
}

void resolve_driver_functions(CuptiTable& table) {
  if (table.cuMemGetInfo_v2) return;
  // RTLD_NOLOAD: we never load the driver ourselves; by now the app (or CUPTI) has.
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!driver) return;  // no out-of-memory forensics, nothing else lost
  resolve(driver, "cuMemGetInfo_v2", table.cuMemGetInfo_v2);
  // The reference RTLD_NOLOAD took is kept on purpose: it pins the driver, so the pointer can never dangle.
}

void publish_table(const CuptiTable* table) { g_published.store(table, std::memory_order_release); }

const CuptiTable* cupti_table() { return g_published.load(std::memory_order_acquire); }

void report_failure(const CuptiTable* table, CUptiResult result, bool missing, const char* call, const char* file,
                    int line, std::string* why, std::atomic<bool>& reported) {
  if (!why && reported.exchange(true, std::memory_order_relaxed)) return;  // said once already
  const char* text = nullptr;
  if (missing) {
    text = "the entry point is missing from this libcupti";
  } else if (!table->cuptiGetResultString || table->cuptiGetResultString(result, &text) != CUPTI_SUCCESS || !text) {
    text = "unknown CUPTI error";
  }
  std::string message = std::string(call) + " failed (" + short_file(file) + ":" + std::to_string(line) + "): " + text +
                        " (" + std::to_string(static_cast<int>(result)) + ")";
  if (why) {
    *why = std::move(message);
    return;
  }
  write_stderr("gpumemtrace: " + message + " (reported once)\n");
}

void switch_sites_of_domain(const CuptiTable* table, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain,
                            bool on) {
  for (const CallbackSite& site : kCallbackSites) {
    if (site.domain != domain) continue;
    GMT_CUPTI_CALL(table, nullptr, cuptiEnableCallback, on ? 1 : 0, subscriber, site.domain, site.cbid);
  }
}

}  // namespace gmt::cupti
