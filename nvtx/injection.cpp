// NVTX's injection entry point. Every library that includes NVTX (an "NVTX copy": the app, libtorch, NCCL, ...,
// and this library itself, for emitting) loads NVTX_INJECTION64_PATH on its first NVTX call and calls
// InitializeInjectionNvtx2 with its own getExportTable; we fill that copy's CORE and CORE2 callback tables with
// our handlers (nvtx/handlers.cpp). Once per copy: a copy seen before is left as it is.
//
// Chaining (GMT_NVTX_CHAIN, set by `run` when another tool already owned NVTX_INJECTION64_PATH): for each copy
// we first let that tool initialize the same tables, read back what it installed for the callbacks we handle
// (our handlers forward to it), and leave everything else it installed in place. If its initialization fails,
// the tables are put back as they were, as NVTX itself would have unloaded it. Our own failure never costs the
// app its NVTX: we then return the chained tool's result.
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "nvtx/chain.h"
#include "nvtx/nvtx_settings.h"
#include "recorder/guard.h"
#include "schema/environment.h"

// After chain.h, which sets NVTX_NO_IMPL (a block of its own, so that include sorting keeps it here).
#include <nvtx3/nvToolsExtMem.h>  // NVTX_EXT_MODULEID_MEM and the extension types

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t);

namespace gmt::nvtx {
namespace {

// NVTX_CB_MODULE_CORE (1) .. NVTX_CB_MODULE_SYNC (6): the modules of the NVTX version we are built against.
constexpr unsigned kModules = NVTX_CB_MODULE_SIZE;

struct Tables {
  NvtxFunctionTable table[kModules] = {};
  unsigned size[kModules] = {};  // as GetModuleFunctionTable reports it: valid ids are 1 .. size - 1

  NvtxFunctionPointer* slot(unsigned module, unsigned id) const {
    if (module >= kModules || !table[module] || id == 0 || id >= size[module]) return nullptr;
    return table[module][id];
  }
};

bool read_tables(NvtxGetExportTableFunc_t get_export_table, Tables& t) {
  auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (!callbacks || callbacks->struct_size < sizeof(NvtxExportTableCallbacks) || !callbacks->GetModuleFunctionTable) {
    return false;
  }
  for (unsigned m = NVTX_CB_MODULE_CORE; m < kModules; ++m) {
    NvtxFunctionTable table = nullptr;
    unsigned size = 0;
    if (callbacks->GetModuleFunctionTable(static_cast<NvtxCallbackModule>(m), &table, &size) && table) {
      t.table[m] = table;
      t.size[m] = size;
    }
  }
  return t.table[NVTX_CB_MODULE_CORE] != nullptr;
}

// Every slot of every module, as it was before the chained tool's initialization.
struct Snapshot {
  std::vector<std::pair<NvtxFunctionPointer*, NvtxFunctionPointer>> slots;

  explicit Snapshot(const Tables& t) {
    for (unsigned m = 0; m < kModules; ++m) {
      for (unsigned id = 1; id < t.size[m]; ++id) {
        if (NvtxFunctionPointer* s = t.slot(m, id)) slots.emplace_back(s, *s);
      }
    }
  }
  void restore() const {
    for (auto [s, value] : slots) *s = value;
  }
  NvtxFunctionPointer before(const NvtxFunctionPointer* s) const {
    for (auto [at, value] : slots) {
      if (at == s) return value;
    }
    return nullptr;
  }
};

bool already_installed(const Tables& t) {
  const HandledCallback& push = handled_callbacks()[static_cast<unsigned>(Callback::RangePushA)];
  NvtxFunctionPointer* s = t.slot(push.module, push.id);
  return s && *s == push.handler;
}

// What the chained tool installed for the callbacks we handle: a slot it changed. One it left alone still
// holds NVTX's own initializer (calling that now would spin on the initialization in progress): null.
Chain read_chain(const Tables& t, const Snapshot& before) {
  Chain c;
  const HandledCallback* handled = handled_callbacks();
  for (unsigned i = 0; i < kCallbacks; ++i) {
    NvtxFunctionPointer* s = t.slot(handled[i].module, handled[i].id);
    if (s && *s != before.before(s)) c.fn[i] = *s;
  }
  return c;
}

bool same_chain(const Chain& a, const Chain& b) {
  for (unsigned i = 0; i < kCallbacks; ++i) {
    if (a.fn[i] != b.fn[i]) return false;
  }
  return true;
}

void install(const Tables& t) {
  const HandledCallback* handled = handled_callbacks();
  for (unsigned i = 0; i < kCallbacks; ++i) {
    if (NvtxFunctionPointer* s = t.slot(handled[i].module, handled[i].id)) *s = handled[i].handler;
  }
}

void warn(const std::string& message) {
  std::string line = "gpumemtrace: " + message + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

bool same_file(const char* a, const char* b) {
  struct stat sa {
  }, sb{};
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// Whether `path` is this library, found without loading it: a dlopen of ourselves while the process exits
// (after the loader has reset our "initialized" mark in _dl_fini) runs all our constructors a second time.
bool is_this_library(const char* path) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&InitializeInjectionNvtx2), &info) == 0 || !info.dli_fname) return false;
  return same_file(path, info.dli_fname);
}

// The tool to chain to: GMT_NVTX_CHAIN (`run` moved it there from NVTX_INJECTION64_PATH), or else
// NVTX_INJECTION64_PATH itself when it names another tool (`run --no-nvtx-capture` under Nsight: the app's
// copies load that tool directly, and our own copy, which emits, attaches to us and chains to it).
const char* chain_path() {
  const char* chain = getenv(schema::env::kNvtxChain);
  if (chain && *chain) return is_this_library(chain) ? nullptr : chain;
  const char* injection = getenv("NVTX_INJECTION64_PATH");
  if (injection && *injection && !is_this_library(injection)) return injection;
  return nullptr;
}

// The chained tool's library: loaded once, on the first copy (or extension module).
using ExtensionInit = int (*)(void* module_info);  // NvtxExtInitializeInjectionFunc_t (nvtxExtTypes.h)
struct ChainLibrary {
  bool tried = false;
  NvtxInitializeInjectionNvtxFunc_t init = nullptr;
  ExtensionInit extension_init = nullptr;
};
ChainLibrary g_chain_library;

NvtxInitializeInjectionNvtxFunc_t chain_init() {
  ChainLibrary& library = g_chain_library;
  if (library.tried) return library.init;
  library.tried = true;
  const char* path = chain_path();
  if (!path) return nullptr;
  void* handle = dlopen(path, RTLD_LAZY);  // as NVTX itself loads an injection library
  if (!handle) {
    const char* error = dlerror();
    warn(std::string("cannot load the NVTX tool to chain to (") + path + "): " + (error ? error : "unknown error") +
         "; it will not see the application's NVTX ranges");
    return nullptr;
  }
  auto init = reinterpret_cast<NvtxInitializeInjectionNvtxFunc_t>(dlsym(handle, "InitializeInjectionNvtx2"));
  if (!init || init == &InitializeInjectionNvtx2) {
    if (!init) {
      warn(std::string("the NVTX tool to chain to (") + path + ") has no InitializeInjectionNvtx2: not chaining");
      dlclose(handle);
    }
    return nullptr;
  }
  library.init = init;
  library.extension_init = reinterpret_cast<ExtensionInit>(dlsym(handle, "InitializeInjectionNvtxExtension"));
  return init;
}

std::mutex g_mutex;  // one copy initializes at a time

// The copies initialized so far. Leaked: a library's NVTX may still initialize from a static destructor.
std::vector<NvtxGetExportTableFunc_t>& seen_copies() {
  static auto* seen = new std::vector<NvtxGetExportTableFunc_t>;
  return *seen;
}
// Set while the chained tool initializes: an NVTX copy of its own that initializes meanwhile (on this thread)
// is declined rather than chained back into the tool that is still starting.
thread_local bool t_in_chained_init __attribute__((tls_model("initial-exec"))) = false;

bool initialize_copy(NvtxGetExportTableFunc_t get_export_table) {
  for (auto seen : seen_copies()) {
    if (seen == get_export_table) return true;
  }
  Tables t;
  bool have_tables = read_tables(get_export_table, t);
  if (have_tables && already_installed(t)) return true;
  seen_copies().push_back(get_export_table);

  bool chained = false;
  if (NvtxInitializeInjectionNvtxFunc_t init = chain_init()) {
    Snapshot before(t);
    t_in_chained_init = true;
    int result = init(get_export_table);
    t_in_chained_init = false;
    if (result == 0) {
      before.restore();
      static bool warned = false;
      if (!warned) warn("the chained NVTX tool refused to initialize; only gpumemtrace captures NVTX ranges");
      warned = true;
    } else if (have_tables) {
      chained = true;
      Chain c = read_chain(t, before);
      const Chain* current = chain();
      if (!current) {
        g_chain.store(new Chain(c), std::memory_order_release);  // never freed: handlers read it until exit
        on_chain_ready();
      } else if (!same_chain(*current, c)) {
        // Our handlers forward to one chain; this copy got other functions from the tool. Leave the copy to
        // the tool entirely rather than send its calls to the wrong functions.
        static bool warned = false;
        if (!warned)
          warn("the chained NVTX tool installed different handlers in one library's NVTX; its ranges are "
               "left to that tool and not captured");
        warned = true;
        return true;
      }
    } else {
      chained = true;
    }
  }
  if (!have_tables) return chained;
  if (auto* version = static_cast<const NvtxExportTableVersionInfo*>(get_export_table(NVTX_ETID_VERSIONINFO));
      version && version->struct_size >= sizeof(NvtxExportTableVersionInfo) && version->SetInjectionNvtxVersion) {
    version->SetInjectionNvtxVersion(NVTX_VERSION);
  }
  install(t);
  return true;
}

// NVTX's extension slot states (nvtxExtImpl.h: FRESH 0 .. INIT_FN_FAILED 4): no function.
bool is_function(intptr_t slot) { return slot > 4; }

bool is_memory_module(const nvtxExtModuleInfo_t* info) {
  return info->structSize >= sizeof(nvtxExtModuleInfo_t) && info->moduleId == NVTX_EXT_MODULEID_MEM &&
         info->segmentsCount >= 1 && info->segments && info->segments[0].functionSlots;
}

// One NVTX copy's memory module (nvtx/memory.cpp): as for the core tables, the chained tool first fills the
// module's slots, we read back what it put in the slots we handle (our handlers forward to it) and leave the rest
// to it; if it refuses, the slots are put back. We attach even without a tool, or when it refuses: a slot left
// empty is then disabled by NVTX, as without any tool.
int initialize_memory_module(nvtxExtModuleInfo_t* info, ExtensionInit chained_init) {
  nvtxExtModuleSegment_t& segment = info->segments[0];
  intptr_t* slots = segment.functionSlots;
  const size_t count = segment.slotCount;
  const HandledSlot* handled = handled_memory_slots();
  auto slot = [&](MemCallback c) -> intptr_t* {
    unsigned id = handled[static_cast<unsigned>(c)].slot;
    return id < count ? &slots[id] : nullptr;
  };
  if (intptr_t* first = slot(MemCallback::HeapRegister); first && *first == handled[0].handler) return 1;  // seen
  std::vector<intptr_t> before(slots, slots + count);
  if (chained_init) {
    t_in_chained_init = true;
    int result = chained_init(info);
    t_in_chained_init = false;
    if (result == 0) {
      std::copy(before.begin(), before.end(), slots);
    } else {
      MemChain c;
      for (unsigned i = 0; i < kMemCallbacks; ++i) {
        intptr_t* s = slot(static_cast<MemCallback>(i));
        if (s && *s != before[handled[i].slot] && is_function(*s)) c.fn[i] = *s;
      }
      const MemChain* current = mem_chain();
      if (!current) {
        g_mem_chain.store(new MemChain(c), std::memory_order_release);  // never freed, like g_chain
      } else if (!std::equal(std::begin(c.fn), std::end(c.fn), std::begin(current->fn))) {
        static bool warned = false;
        if (!warned)
          warn("the chained NVTX tool installed different memory-API handlers in one library's NVTX; its "
               "heaps and regions are left to that tool and not recorded");
        warned = true;
        return result;
      }
    }
  }
  for (unsigned i = 0; i < kMemCallbacks; ++i) {
    if (intptr_t* s = slot(static_cast<MemCallback>(i))) *s = handled[i].handler;
  }
  return 1;
}

}  // namespace
}  // namespace gmt::nvtx

// NVTX's contract: return non-zero when the tool attached (NVTX then calls the installed functions and turns
// the rest into no-ops), zero to be unloaded (every NVTX call of that copy becomes a no-op).
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table) {
  using namespace gmt::nvtx;
  if (!get_export_table || t_in_chained_init) return 0;
  gmt::recorder::HookScope scope;  // the chained tool's start-up (and our own allocations) is not the app's
  std::lock_guard lock(g_mutex);
  return initialize_copy(get_export_table) ? 1 : 0;
}

// NVTX's extensions (payloads, counters, the memory API, ...) load the same library and call this per module.
// The memory API's module is ours too (initialize_memory_module). Every other module goes to the chained tool as
// if it were loaded directly (it fills the module's function slots itself); without one it stays disabled, as it
// would without any tool.
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtxExtension(void* module_info) {
  using namespace gmt::nvtx;
  if (!module_info || t_in_chained_init) return 0;
  gmt::recorder::HookScope scope;
  auto* info = static_cast<nvtxExtModuleInfo_t*>(module_info);
  ExtensionInit init;
  {
    std::lock_guard lock(g_mutex);
    chain_init();
    init = g_chain_library.extension_init;
    if (is_memory_module(info)) return initialize_memory_module(info, init);
  }
  return init ? init(module_info) : 0;
}
