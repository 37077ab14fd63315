// A stand-in for Nsight Systems' NVTX injection library: it attaches to NVTX the way Nsight does
// (InitializeInjectionNvtx2 filling the CORE and CORE2 callback tables) and writes every range and marker it
// receives to a file, one tab-separated line each, so that tests can see what a tool chained behind
// gpumemtrace receives, and what gpumemtrace emits.
//
// Environment:
//   GMT_TEST_NVTX_RECORD        file to append the lines to (required)
//   GMT_TEST_NVTX_LEVEL_OFFSET  added to the levels push/pop return (shows whose return value the app got)
//   GMT_TEST_NVTX_REFUSE        "1": InitializeInjectionNvtx2 returns 0 (a tool that fails to attach)
//
// Lines (domain "-" is the default domain; "BAD" a handle this library never made):
//   init
//   domain_create  <name>
//   register       <domain> <text>
//   push           <domain> <message> <payload or ->
//   pop            <domain>
//   start          <domain> <message> <id>
//   end            <domain> <id> <known|UNKNOWN>
//   mark           <domain> <message> <payload or ->
//   ext_init       <module id>   (an NVTX extension module; its calls stay no-ops here, except the counters
//                                 module's and the memory API's, recorded as below)
//   counter_register <domain> <name> <schema id>
//   counter        <domain> <counter name> <value>   (nvtxCounterSampleInt64)
//   mem_heap_register      <domain> <size>      (hands out handles of its own, never the heap's address)
//   mem_heap_unregister    <domain> <known|UNKNOWN>
//   mem_heap_reset         <domain> <known|UNKNOWN>
//   mem_regions_register   <domain> <heap: known|UNKNOWN> <sizes, comma-separated>   (writes handles of its own)
//   mem_regions_resize     <domain> <sizes>
//   mem_regions_unregister <domain> <pointer|handle> <count> <handles it made among them>
// A message is the text, "(registered:<text>)" for a registered string of ours, "BAD_STRING" for a registered
// handle we never made, "(null)" for none.
#define NVTX_NO_IMPL
#include <fcntl.h>
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCounters.h>
#include <nvtx3/nvToolsExtMem.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>

namespace {

int g_fd = -1;
int g_level_offset = 0;
std::mutex g_mutex;  // guards the sets below
std::set<const void*>* g_domains = new std::set<const void*>;
std::map<const void*, std::string>* g_domain_names = new std::map<const void*, std::string>;
std::map<const void*, std::string>* g_strings = new std::map<const void*, std::string>;
std::set<nvtxRangeId_t>* g_started = new std::set<nvtxRangeId_t>;
nvtxRangeId_t g_next_id = 1000001;  // far from gpumemtrace's own ids: a mix-up shows as UNKNOWN

void emit(const std::string& line) {
  std::string out = line + "\n";
  ssize_t ignored = write(g_fd, out.data(), out.size());  // O_APPEND: one line per write
  (void)ignored;
}

std::string utf8(const wchar_t* text) {
  std::string out;
  for (; *text; ++text) {
    auto c = static_cast<uint32_t>(*text);
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

std::string domain_name(nvtxDomainHandle_t domain) {
  if (!domain) return "-";
  std::lock_guard lock(g_mutex);
  auto it = g_domain_names->find(domain);
  return it == g_domain_names->end() ? "BAD" : it->second;
}

std::string message(const nvtxEventAttributes_t* a) {
  if (!a) return "(null)";
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: return a->message.ascii ? a->message.ascii : "(null)";
    case NVTX_MESSAGE_TYPE_UNICODE: return a->message.unicode ? utf8(a->message.unicode) : "(null)";
    case NVTX_MESSAGE_TYPE_REGISTERED: {
      if (!a->message.registered) return "(null)";
      std::lock_guard lock(g_mutex);
      auto it = g_strings->find(a->message.registered);
      return it == g_strings->end() ? "BAD_STRING" : "(registered:" + it->second + ")";
    }
    default: return "(null)";
  }
}

std::string payload(const nvtxEventAttributes_t* a) {
  if (!a || a->payloadType != NVTX_PAYLOAD_TYPE_UNSIGNED_INT64) return "-";
  return std::to_string(a->payload.ullValue);
}

// Levels per thread and domain, as NVTX specifies them. Leaked per thread, so that calls from exit handlers
// (after thread_local objects are destroyed) still work.
thread_local std::map<const void*, int>* t_levels = nullptr;

std::map<const void*, int>& levels() {
  if (!t_levels) t_levels = new std::map<const void*, int>;
  return *t_levels;
}

int push(const void* domain, const std::string& line) {
  emit(line);
  return levels()[domain]++ + g_level_offset;
}

int pop(const void* domain, const std::string& line) {
  emit(line);
  int& level = levels()[domain];
  if (level == 0) return -1;
  return --level + g_level_offset;
}

nvtxRangeId_t start(const std::string& domain, const std::string& text) {
  nvtxRangeId_t id;
  {
    std::lock_guard lock(g_mutex);
    id = g_next_id++;
    g_started->insert(id);
  }
  emit("start\t" + domain + "\t" + text + "\t" + std::to_string(id));
  return id;
}

void end(const std::string& domain, nvtxRangeId_t id) {
  bool known;
  {
    std::lock_guard lock(g_mutex);
    known = g_started->erase(id) == 1;
  }
  emit("end\t" + domain + "\t" + std::to_string(id) + "\t" + (known ? "known" : "UNKNOWN"));
}

void mark_ex(const nvtxEventAttributes_t* a) { emit("mark\t-\t" + message(a) + "\t" + payload(a)); }
void mark_a(const char* text) { emit(std::string("mark\t-\t") + (text ? text : "(null)") + "\t-"); }
void mark_w(const wchar_t* text) { emit("mark\t-\t" + (text ? utf8(text) : std::string("(null)")) + "\t-"); }
nvtxRangeId_t start_ex(const nvtxEventAttributes_t* a) { return start("-", message(a)); }
nvtxRangeId_t start_a(const char* text) { return start("-", text ? text : "(null)"); }
nvtxRangeId_t start_w(const wchar_t* text) { return start("-", text ? utf8(text) : "(null)"); }
void range_end(nvtxRangeId_t id) { end("-", id); }
int push_ex(const nvtxEventAttributes_t* a) { return push(nullptr, "push\t-\t" + message(a) + "\t" + payload(a)); }
int push_a(const char* text) { return push(nullptr, std::string("push\t-\t") + (text ? text : "(null)") + "\t-"); }
int push_w(const wchar_t* text) {
  return push(nullptr, "push\t-\t" + (text ? utf8(text) : std::string("(null)")) + "\t-");
}
int range_pop() { return pop(nullptr, "pop\t-"); }

void domain_mark_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  emit("mark\t" + domain_name(d) + "\t" + message(a) + "\t" + payload(a));
}
nvtxRangeId_t domain_start_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return start(domain_name(d), message(a));
}
void domain_end(nvtxDomainHandle_t d, nvtxRangeId_t id) { end(domain_name(d), id); }
int domain_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return push(d, "push\t" + domain_name(d) + "\t" + message(a) + "\t" + payload(a));
}
int domain_pop(nvtxDomainHandle_t d) { return pop(d, "pop\t" + domain_name(d)); }

nvtxStringHandle_t register_text(nvtxDomainHandle_t d, const std::string& text) {
  emit("register\t" + domain_name(d) + "\t" + text);
  auto* handle = reinterpret_cast<nvtxStringHandle_t>(new char);
  std::lock_guard lock(g_mutex);
  (*g_strings)[handle] = text;
  return handle;
}
nvtxStringHandle_t register_a(nvtxDomainHandle_t d, const char* text) { return register_text(d, text ? text : ""); }
nvtxStringHandle_t register_w(nvtxDomainHandle_t d, const wchar_t* text) {
  return register_text(d, text ? utf8(text) : "");
}

nvtxDomainHandle_t create_domain(const std::string& name) {
  emit("domain_create\t" + name);
  auto* handle = reinterpret_cast<nvtxDomainHandle_t>(new char);
  std::lock_guard lock(g_mutex);
  (*g_domain_names)[handle] = name;
  return handle;
}
nvtxDomainHandle_t domain_create_a(const char* name) { return create_domain(name ? name : ""); }
nvtxDomainHandle_t domain_create_w(const wchar_t* name) { return create_domain(name ? utf8(name) : ""); }

// Counters (NVTX's counters extension): ids from 1, names kept to label the samples.
std::map<uint64_t, std::string>* g_counters = new std::map<uint64_t, std::string>;

uint64_t counter_register(nvtxDomainHandle_t d, const nvtxCounterAttr_t* attr) {
  if (!attr) return NVTX_COUNTER_ID_NONE;
  std::string name = attr->name ? attr->name : "(null)";
  emit("counter_register\t" + domain_name(d) + "\t" + name + "\t" + std::to_string(attr->schemaId));
  std::lock_guard lock(g_mutex);
  uint64_t id = g_counters->size() + 1;
  (*g_counters)[id] = name;
  return id;
}

void counter_sample_int64(nvtxDomainHandle_t d, uint64_t id, int64_t value) {
  std::string name;
  {
    std::lock_guard lock(g_mutex);
    auto it = g_counters->find(id);
    name = it == g_counters->end() ? "UNKNOWN" : it->second;
  }
  emit("counter\t" + domain_name(d) + "\t" + name + "\t" + std::to_string(value));
}

// The memory API: handles are fresh allocations of ours, so that a handle gpumemtrace made up shows as UNKNOWN.
std::set<const void*>* g_heaps = new std::set<const void*>;
std::set<const void*>* g_regions = new std::set<const void*>;

std::string known(std::set<const void*>* handles, const void* handle) {
  std::lock_guard lock(g_mutex);
  return handles->count(handle) ? "known" : "UNKNOWN";
}

std::string sizes(const void* elements, size_t stride, size_t count) {
  std::string out;
  for (size_t i = 0; elements && i < count; ++i) {
    auto* range = reinterpret_cast<const nvtxMemVirtualRangeDesc_t*>(static_cast<const char*>(elements) + i * stride);
    out += (i ? "," : "") + std::to_string(range->size);
  }
  return out.empty() ? "-" : out;
}

nvtxMemHeapHandle_t mem_heap_register(nvtxDomainHandle_t d, const nvtxMemHeapDesc_t* desc) {
  auto* range = desc ? static_cast<const nvtxMemVirtualRangeDesc_t*>(desc->typeSpecificDesc) : nullptr;
  emit("mem_heap_register\t" + domain_name(d) + "\t" + (range ? std::to_string(range->size) : "-"));
  auto* handle = reinterpret_cast<nvtxMemHeapHandle_t>(new char);
  std::lock_guard lock(g_mutex);
  g_heaps->insert(handle);
  return handle;
}
void mem_heap_unregister(nvtxDomainHandle_t d, nvtxMemHeapHandle_t heap) {
  emit("mem_heap_unregister\t" + domain_name(d) + "\t" + known(g_heaps, heap));
}
void mem_heap_reset(nvtxDomainHandle_t d, nvtxMemHeapHandle_t heap) {
  emit("mem_heap_reset\t" + domain_name(d) + "\t" + known(g_heaps, heap));
}
void mem_regions_register(nvtxDomainHandle_t d, const nvtxMemRegionsRegisterBatch_t* b) {
  if (!b) return emit("mem_regions_register\t" + domain_name(d) + "\t(null)");
  emit("mem_regions_register\t" + domain_name(d) + "\t" + known(g_heaps, b->heap) + "\t" +
       sizes(b->regionDescElements, b->regionDescElementSize, b->regionCount));
  for (size_t i = 0; b->regionHandleElementsOut && i < b->regionCount; ++i) {
    auto* handle = reinterpret_cast<nvtxMemRegionHandle_t>(new char);
    b->regionHandleElementsOut[i] = handle;
    std::lock_guard lock(g_mutex);
    g_regions->insert(handle);
  }
}
void mem_regions_resize(nvtxDomainHandle_t d, const nvtxMemRegionsResizeBatch_t* b) {
  emit("mem_regions_resize\t" + domain_name(d) + "\t" +
       (b ? sizes(b->regionDescElements, b->regionDescElementSize, b->regionDescCount) : "(null)"));
}
void mem_regions_unregister(nvtxDomainHandle_t d, const nvtxMemRegionsUnregisterBatch_t* b) {
  if (!b) return emit("mem_regions_unregister\t" + domain_name(d) + "\t(null)");
  size_t made = 0;
  for (size_t i = 0; b->refElements && i < b->refCount; ++i) {
    if (b->refType == NVTX_MEM_REGION_REF_TYPE_HANDLE && known(g_regions, b->refElements[i].handle) == "known") ++made;
  }
  emit("mem_regions_unregister\t" + domain_name(d) + "\t" +
       (b->refType == NVTX_MEM_REGION_REF_TYPE_HANDLE ? "handle" : "pointer") + "\t" + std::to_string(b->refCount) +
       "\t" + std::to_string(made));
}

template <typename F>
void set(NvtxFunctionTable table, unsigned size, unsigned id, F f) {
  if (table && id < size && table[id]) *table[id] = reinterpret_cast<NvtxFunctionPointer>(f);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  const char* path = getenv("GMT_TEST_NVTX_RECORD");
  if (!path || !*path) return 0;
  if (g_fd < 0) g_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (const char* offset = getenv("GMT_TEST_NVTX_LEVEL_OFFSET")) g_level_offset = std::atoi(offset);
  const char* refuse = getenv("GMT_TEST_NVTX_REFUSE");
  if (refuse && *refuse == '1') {
    emit("refused");
    return 0;
  }
  auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
  if (!callbacks) return 0;
  NvtxFunctionTable core = nullptr, core2 = nullptr;
  unsigned core_size = 0, core2_size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size) ||
      !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size)) {
    return 0;
  }
  emit("init");
  set(core, core_size, NVTX_CBID_CORE_MarkEx, mark_ex);
  set(core, core_size, NVTX_CBID_CORE_MarkA, mark_a);
  set(core, core_size, NVTX_CBID_CORE_MarkW, mark_w);
  set(core, core_size, NVTX_CBID_CORE_RangeStartEx, start_ex);
  set(core, core_size, NVTX_CBID_CORE_RangeStartA, start_a);
  set(core, core_size, NVTX_CBID_CORE_RangeStartW, start_w);
  set(core, core_size, NVTX_CBID_CORE_RangeEnd, range_end);
  set(core, core_size, NVTX_CBID_CORE_RangePushEx, push_ex);
  set(core, core_size, NVTX_CBID_CORE_RangePushA, push_a);
  set(core, core_size, NVTX_CBID_CORE_RangePushW, push_w);
  set(core, core_size, NVTX_CBID_CORE_RangePop, range_pop);
  set(core2, core2_size, NVTX_CBID_CORE2_DomainMarkEx, domain_mark_ex);
  set(core2, core2_size, NVTX_CBID_CORE2_DomainRangeStartEx, domain_start_ex);
  set(core2, core2_size, NVTX_CBID_CORE2_DomainRangeEnd, domain_end);
  set(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, domain_push_ex);
  set(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, domain_pop);
  set(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA, register_a);
  set(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringW, register_w);
  set(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, domain_create_a);
  set(core2, core2_size, NVTX_CBID_CORE2_DomainCreateW, domain_create_w);
  return 1;
}

// NVTX extensions: record that the module reached us; attach to the counters module (its register and int64
// sample slots) and to the memory API (heaps and regions), and nothing else (other modules' calls become no-ops).
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtxExtension(void* module_info) {
  if (g_fd < 0 || !module_info) return 0;
  auto* info = static_cast<nvtxExtModuleInfo_t*>(module_info);
  emit("ext_init\t" + std::to_string(info->moduleId));
  if (info->moduleId == NVTX_EXT_COUNTERS_MODULEID && info->segmentsCount > 0 && info->segments) {
    nvtxExtModuleSegment_t& segment = info->segments[0];
    if (segment.functionSlots && segment.slotCount > NVTX3EXT_CBID_nvtxCounterSampleInt64) {
      segment.functionSlots[NVTX3EXT_CBID_nvtxCounterRegister] = reinterpret_cast<intptr_t>(&counter_register);
      segment.functionSlots[NVTX3EXT_CBID_nvtxCounterSampleInt64] = reinterpret_cast<intptr_t>(&counter_sample_int64);
    }
  }
  if (info->moduleId == NVTX_EXT_MODULEID_MEM && info->segmentsCount > 0 && info->segments) {
    nvtxExtModuleSegment_t& segment = info->segments[0];
    if (segment.functionSlots && segment.slotCount > NVTX3EXT_CBID_nvtxMemRegionsUnregister) {
      segment.functionSlots[NVTX3EXT_CBID_nvtxMemHeapRegister] = reinterpret_cast<intptr_t>(&mem_heap_register);
      segment.functionSlots[NVTX3EXT_CBID_nvtxMemHeapUnregister] = reinterpret_cast<intptr_t>(&mem_heap_unregister);
      segment.functionSlots[NVTX3EXT_CBID_nvtxMemHeapReset] = reinterpret_cast<intptr_t>(&mem_heap_reset);
      segment.functionSlots[NVTX3EXT_CBID_nvtxMemRegionsRegister] = reinterpret_cast<intptr_t>(&mem_regions_register);
      segment.functionSlots[NVTX3EXT_CBID_nvtxMemRegionsResize] = reinterpret_cast<intptr_t>(&mem_regions_resize);
      segment.functionSlots[NVTX3EXT_CBID_nvtxMemRegionsUnregister] =
          reinterpret_cast<intptr_t>(&mem_regions_unregister);
    }
  }
  return 1;
}
