// The NVTX callbacks we install in every NVTX copy: each turns one push/pop/start/end/mark of the
// application into one event for the recorder (the writer thread makes ranges and marks rows of it), then
// forwards the call to the chained tool. Thin, like the CUDA hooks: the guard first; a name seen before costs
// no lock (recorder/strings.h); domains and registered strings are found in lock-free tables; no SQLite.
//
// Whatever runs under the guard is ours (the writer thread, a hook, gpumemtrace's own emission in
// nvtx/emit.cpp): it is forwarded to the chained tool and never recorded as the application's. So is anything
// in a domain that our own emission created.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "nvtx/chain.h"
#include "nvtx/registry.h"
#include "recorder/allocator_samples.h"
#include "recorder/event.h"
#include "recorder/guard.h"
#include "recorder/recorder.h"
#include "recorder/strings.h"

namespace gmt::nvtx {

std::atomic<const Chain*> g_chain{nullptr};

namespace {

using recorder::HookScope;
using schema::EventKind;

// Ids of ranges (ranges.id), process-wide; also the nvtxRangeId_t of start/end ranges when no chained tool
// hands out its own.
std::atomic<uint64_t> g_next_range_id{1};

template <typename F>
F chained(Callback c) {
  const Chain* chain_now = chain();
  return chain_now ? chain_now->get<F>(c) : nullptr;
}

// ---- Names ----

// wchar_t is UTF-32 on Linux. Invalid code points become U+FFFD; the text is cut where `capacity` ends.
size_t to_utf8(const wchar_t* text, char* out, size_t capacity) {
  size_t n = 0;
  for (; *text; ++text) {
    auto c = static_cast<uint32_t>(*text);
    if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) c = 0xFFFD;
    unsigned char bytes[4];
    size_t length;
    if (c < 0x80) {
      bytes[0] = static_cast<unsigned char>(c);
      length = 1;
    } else if (c < 0x800) {
      bytes[0] = static_cast<unsigned char>(0xC0 | (c >> 6));
      bytes[1] = static_cast<unsigned char>(0x80 | (c & 0x3F));
      length = 2;
    } else if (c < 0x10000) {
      bytes[0] = static_cast<unsigned char>(0xE0 | (c >> 12));
      bytes[1] = static_cast<unsigned char>(0x80 | ((c >> 6) & 0x3F));
      bytes[2] = static_cast<unsigned char>(0x80 | (c & 0x3F));
      length = 3;
    } else {
      bytes[0] = static_cast<unsigned char>(0xF0 | (c >> 18));
      bytes[1] = static_cast<unsigned char>(0x80 | ((c >> 12) & 0x3F));
      bytes[2] = static_cast<unsigned char>(0x80 | ((c >> 6) & 0x3F));
      bytes[3] = static_cast<unsigned char>(0x80 | (c & 0x3F));
      length = 4;
    }
    if (n + length > capacity) break;
    std::memcpy(out + n, bytes, length);
    n += length;
  }
  return n;
}

uint32_t name_of(const char* text) { return text ? recorder::intern_string(text) : 0; }

uint32_t name_of(const wchar_t* text) {
  if (!text) return 0;
  char utf8[1024];
  size_t n = to_utf8(text, utf8, sizeof utf8);
  return recorder::intern_string(std::string_view(utf8, n));
}

// The message of Ex attributes. Payloads, colors and categories are not recorded.
struct Message {
  uint32_t name_id = 0;
  bool fake_registered = false;  // a registered string of ours: the chained tool must see nullptr
};

Message read_message(const nvtxEventAttributes_t* a, bool want_name) {
  Message m;
  if (!a || a->size < offsetof(nvtxEventAttributes_t, message) + sizeof(nvtxMessageValue_t)) return m;
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      if (want_name) m.name_id = name_of(a->message.ascii);
      break;
    case NVTX_MESSAGE_TYPE_UNICODE:
      if (want_name) m.name_id = name_of(a->message.unicode);
      break;
    case NVTX_MESSAGE_TYPE_REGISTERED: {
      StringInfo s = find_string(a->message.registered);
      m.name_id = s.name_id;
      m.fake_registered = s.fake;
      break;
    }
    default: break;
  }
  return m;
}

// The attributes as the chained tool must see them (a copy only when a registered string must be rewritten).
const nvtxEventAttributes_t* forwarded(const nvtxEventAttributes_t* a, const Message& m, nvtxEventAttributes_t& copy) {
  if (!m.fake_registered) return a;
  copy = nvtxEventAttributes_t{};
  std::memcpy(&copy, a, std::min<size_t>(a->size, sizeof copy));
  copy.message.registered = nullptr;
  return &copy;
}

nvtxDomainHandle_t forwarded(nvtxDomainHandle_t domain, const DomainInfo& d) { return d.fake ? nullptr : domain; }

// ---- Events ----

// A range begun (RangeBegin) or ended (RangeEnd): recorder/event.h, RangePayload.
void record_range(EventKind kind, uint64_t time_ns, uint64_t row_id, uint64_t app_range_id, uint32_t name_id,
                  uint32_t domain_id, int32_t depth) {
  recorder::EventRecord e;
  e.time_ns = time_ns;
  e.thread_id = recorder::current_thread_id();
  e.kind = kind;
  e.range = recorder::RangePayload{row_id, app_range_id, name_id, domain_id, depth};
  recorder::record(e, /*take_stack=*/false);
}

void record_mark(uint32_t name_id, uint32_t domain_id) {
  recorder::EventRecord e;
  e.time_ns = recorder::now_ns();
  e.thread_id = recorder::current_thread_id();
  e.kind = EventKind::Mark;
  e.mark = recorder::MarkPayload{name_id, domain_id};
  recorder::record(e, /*take_stack=*/false);
}

// Push/pop ranges open on this thread, innermost last. NVTX counts levels per domain; a domain handle (nullptr
// for the default domain) is the key. Plain vector: it only allocates when nesting grows past its capacity.
struct OpenRange {
  const void* domain;
  uint64_t id;
};
thread_local bool t_ranges_gone = false;  // set when this thread's vector is destroyed at thread exit
struct ThreadRanges {
  std::vector<OpenRange> open;
  ~ThreadRanges() { t_ranges_gone = true; }
};
thread_local ThreadRanges t_ranges;

int open_push(const void* domain, uint32_t domain_id, uint32_t name_id, uint64_t time_ns) {
  if (t_ranges_gone) return NVTX_NO_PUSH_POP_TRACKING;
  auto& open = t_ranges.open;
  int depth =
      static_cast<int>(std::count_if(open.begin(), open.end(), [&](const OpenRange& r) { return r.domain == domain; }));
  uint64_t id = g_next_range_id.fetch_add(1, std::memory_order_relaxed);
  open.push_back(OpenRange{domain, id});
  record_range(EventKind::RangeBegin, time_ns, id, 0, name_id, domain_id, depth);
  return depth;
}

// The level of the range ended (0-based), or -1 when this thread has none open in that domain.
int close_push(const void* domain, uint64_t time_ns) {
  if (t_ranges_gone) return NVTX_NO_PUSH_POP_TRACKING;
  auto& open = t_ranges.open;
  for (size_t i = open.size(); i-- > 0;) {
    if (open[i].domain != domain) continue;
    uint64_t id = open[i].id;
    int depth = static_cast<int>(std::count_if(open.begin(), open.begin() + static_cast<ptrdiff_t>(i),
                                               [&](const OpenRange& r) { return r.domain == domain; }));
    open.erase(open.begin() + static_cast<ptrdiff_t>(i));
    record_range(EventKind::RangeEnd, time_ns, id, 0, 0, 0, 0);
    if (depth == 0) recorder::note_top_level_range_end();  // a step ended: the allocator sampler may look
    return depth;
  }
  return -1;
}

// A start/end range. `key` is the nvtxRangeId_t the app gets: the chained tool's when it made one (so that
// its nvtxRangeEnd finds its range), else our row id.
nvtxRangeId_t open_start(uint32_t domain_id, uint32_t name_id, uint64_t time_ns, bool chained_key, nvtxRangeId_t key) {
  uint64_t id = g_next_range_id.fetch_add(1, std::memory_order_relaxed);
  if (!chained_key) key = id;
  record_range(EventKind::RangeBegin, time_ns, id, key, name_id, domain_id, -1);
  return key;
}

void close_start(nvtxRangeId_t key) { record_range(EventKind::RangeEnd, recorder::now_ns(), 0, key, 0, 0, 0); }

void mark(uint32_t domain_id, uint32_t name_id) { record_mark(name_id, domain_id); }

// ---- NVTX_CB_MODULE_CORE: the default domain ----

template <typename Text>
int push_text(Callback c, const Text* message) {
  using F = int(NVTX_API*)(const Text*);
  HookScope scope;
  int level = NVTX_NO_PUSH_POP_TRACKING;
  if (scope.active()) {
    uint64_t t = recorder::now_ns();
    level = open_push(nullptr, 0, name_of(message), t);
  }
  if (auto f = chained<F>(c)) return f(message);
  return level;
}
int NVTX_API on_push_a(const char* message) { return push_text(Callback::RangePushA, message); }
int NVTX_API on_push_w(const wchar_t* message) { return push_text(Callback::RangePushW, message); }

int NVTX_API on_push_ex(const nvtxEventAttributes_t* a) {
  HookScope scope;
  uint64_t t = recorder::now_ns();
  Message m = read_message(a, scope.active());
  int level = scope.active() ? open_push(nullptr, 0, m.name_id, t) : NVTX_NO_PUSH_POP_TRACKING;
  nvtxEventAttributes_t copy;
  if (auto f = chained<nvtxRangePushEx_impl_fntype>(Callback::RangePushEx)) return f(forwarded(a, m, copy));
  return level;
}

int NVTX_API on_pop() {
  HookScope scope;
  auto f = chained<nvtxRangePop_impl_fntype>(Callback::RangePop);
  int chained_level = f ? f() : 0;
  int level = scope.active() ? close_push(nullptr, recorder::now_ns()) : NVTX_NO_PUSH_POP_TRACKING;
  return f ? chained_level : level;
}

template <typename Text>
nvtxRangeId_t start_text(Callback c, const Text* message) {
  using F = nvtxRangeId_t(NVTX_API*)(const Text*);
  HookScope scope;
  auto f = chained<F>(c);
  if (!scope.active()) return f ? f(message) : 0;
  uint64_t t = recorder::now_ns();
  uint32_t name_id = name_of(message);
  return open_start(0, name_id, t, f != nullptr, f ? f(message) : 0);
}
nvtxRangeId_t NVTX_API on_start_a(const char* message) { return start_text(Callback::RangeStartA, message); }
nvtxRangeId_t NVTX_API on_start_w(const wchar_t* message) { return start_text(Callback::RangeStartW, message); }

nvtxRangeId_t NVTX_API on_start_ex(const nvtxEventAttributes_t* a) {
  HookScope scope;
  auto f = chained<nvtxRangeStartEx_impl_fntype>(Callback::RangeStartEx);
  uint64_t t = recorder::now_ns();
  Message m = read_message(a, scope.active());
  nvtxEventAttributes_t copy;
  nvtxRangeId_t key = f ? f(forwarded(a, m, copy)) : 0;
  return scope.active() ? open_start(0, m.name_id, t, f != nullptr, key) : key;
}

void NVTX_API on_end(nvtxRangeId_t id) {
  HookScope scope;
  if (scope.active()) close_start(id);
  if (auto f = chained<nvtxRangeEnd_impl_fntype>(Callback::RangeEnd)) f(id);
}

template <typename Text>
void mark_text(Callback c, const Text* message) {
  using F = void(NVTX_API*)(const Text*);
  HookScope scope;
  if (scope.active()) mark(0, name_of(message));
  if (auto f = chained<F>(c)) f(message);
}
void NVTX_API on_mark_a(const char* message) { mark_text(Callback::MarkA, message); }
void NVTX_API on_mark_w(const wchar_t* message) { mark_text(Callback::MarkW, message); }

void NVTX_API on_mark_ex(const nvtxEventAttributes_t* a) {
  HookScope scope;
  Message m = read_message(a, scope.active());
  if (scope.active()) mark(0, m.name_id);
  nvtxEventAttributes_t copy;
  if (auto f = chained<nvtxMarkEx_impl_fntype>(Callback::MarkEx)) f(forwarded(a, m, copy));
}

// ---- NVTX_CB_MODULE_CORE2: domains ----

int NVTX_API on_domain_push_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) {
  HookScope scope;
  uint64_t t = recorder::now_ns();
  DomainInfo d = find_domain(domain);
  bool app = scope.active() && !d.own;
  Message m = read_message(a, app);
  int level = app ? open_push(domain, d.name_id, m.name_id, t) : NVTX_NO_PUSH_POP_TRACKING;
  nvtxEventAttributes_t copy;
  if (auto f = chained<nvtxDomainRangePushEx_impl_fntype>(Callback::DomainRangePushEx)) {
    return f(forwarded(domain, d), forwarded(a, m, copy));
  }
  return level;
}

int NVTX_API on_domain_pop(nvtxDomainHandle_t domain) {
  HookScope scope;
  DomainInfo d = find_domain(domain);
  auto f = chained<nvtxDomainRangePop_impl_fntype>(Callback::DomainRangePop);
  int chained_level = f ? f(forwarded(domain, d)) : 0;
  int level = scope.active() && !d.own ? close_push(domain, recorder::now_ns()) : NVTX_NO_PUSH_POP_TRACKING;
  return f ? chained_level : level;
}

nvtxRangeId_t NVTX_API on_domain_start_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) {
  HookScope scope;
  uint64_t t = recorder::now_ns();
  DomainInfo d = find_domain(domain);
  bool app = scope.active() && !d.own;
  Message m = read_message(a, app);
  auto f = chained<nvtxDomainRangeStartEx_impl_fntype>(Callback::DomainRangeStartEx);
  nvtxEventAttributes_t copy;
  nvtxRangeId_t key = f ? f(forwarded(domain, d), forwarded(a, m, copy)) : 0;
  return app ? open_start(d.name_id, m.name_id, t, f != nullptr, key) : key;
}

void NVTX_API on_domain_end(nvtxDomainHandle_t domain, nvtxRangeId_t id) {
  HookScope scope;
  DomainInfo d = find_domain(domain);
  if (scope.active() && !d.own) close_start(id);
  if (auto f = chained<nvtxDomainRangeEnd_impl_fntype>(Callback::DomainRangeEnd)) f(forwarded(domain, d), id);
}

void NVTX_API on_domain_mark_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) {
  HookScope scope;
  DomainInfo d = find_domain(domain);
  bool app = scope.active() && !d.own;
  Message m = read_message(a, app);
  if (app) mark(d.name_id, m.name_id);
  nvtxEventAttributes_t copy;
  if (auto f = chained<nvtxDomainMarkEx_impl_fntype>(Callback::DomainMarkEx)) {
    f(forwarded(domain, d), forwarded(a, m, copy));
  }
}

// Domains and registered strings made under the guard are ours: their names are not the app's, not interned.
template <typename Text>
nvtxDomainHandle_t create_domain(Callback c, const Text* name) {
  using F = nvtxDomainHandle_t(NVTX_API*)(const Text*);
  HookScope scope;
  bool own = !scope.active();
  auto f = chained<F>(c);
  const void* chained_handle = f ? f(name) : nullptr;
  auto* handle = register_domain(own ? 0 : name_of(name), chained_handle, own);
  return static_cast<nvtxDomainHandle_t>(const_cast<void*>(handle));
}
nvtxDomainHandle_t NVTX_API on_domain_create_a(const char* name) {
  return create_domain(Callback::DomainCreateA, name);
}
nvtxDomainHandle_t NVTX_API on_domain_create_w(const wchar_t* name) {
  return create_domain(Callback::DomainCreateW, name);
}

template <typename Text>
nvtxStringHandle_t register_text(Callback c, nvtxDomainHandle_t domain, const Text* text) {
  using F = nvtxStringHandle_t(NVTX_API*)(nvtxDomainHandle_t, const Text*);
  HookScope scope;
  DomainInfo d = find_domain(domain);
  auto f = chained<F>(c);
  const void* chained_handle = f ? f(forwarded(domain, d), text) : nullptr;
  bool app = scope.active() && !d.own;
  auto* handle = register_string(app ? name_of(text) : 0, chained_handle);
  return static_cast<nvtxStringHandle_t>(const_cast<void*>(handle));
}
nvtxStringHandle_t NVTX_API on_register_a(nvtxDomainHandle_t domain, const char* text) {
  return register_text(Callback::DomainRegisterStringA, domain, text);
}
nvtxStringHandle_t NVTX_API on_register_w(nvtxDomainHandle_t domain, const wchar_t* text) {
  return register_text(Callback::DomainRegisterStringW, domain, text);
}

template <typename F>
NvtxFunctionPointer generic(F f) {
  return reinterpret_cast<NvtxFunctionPointer>(f);
}

// Indexed by Callback: keep in its order.
const HandledCallback kHandled[kCallbacks] = {
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_MarkEx, generic(on_mark_ex)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_MarkA, generic(on_mark_a)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_MarkW, generic(on_mark_w)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeStartEx, generic(on_start_ex)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeStartA, generic(on_start_a)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeStartW, generic(on_start_w)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeEnd, generic(on_end)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushEx, generic(on_push_ex)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushA, generic(on_push_a)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushW, generic(on_push_w)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePop, generic(on_pop)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainMarkEx, generic(on_domain_mark_ex)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangeStartEx, generic(on_domain_start_ex)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangeEnd, generic(on_domain_end)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePushEx, generic(on_domain_push_ex)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePop, generic(on_domain_pop)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRegisterStringA, generic(on_register_a)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRegisterStringW, generic(on_register_w)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainCreateA, generic(on_domain_create_a)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainCreateW, generic(on_domain_create_w)},
};

}  // namespace

const HandledCallback* handled_callbacks() { return kHandled; }

}  // namespace gmt::nvtx
