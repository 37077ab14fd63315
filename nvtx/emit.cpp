// gpumemtrace's own NVTX annotations, in the domain "gpumemtrace", with `run --nvtx-emit` (GMT_NVTX_EMIT=1):
//   - ranges around our own work, all on the writer thread: "start-up: create trace", "flush" (payload: events
//     written; only flushes that wrote something), "shutdown" (the flush at exit);
//   - a marker for each failed allocation: "allocation failed: <bytes> B, <error name> (<code>)";
//   - a marker each time live bytes pass a new multiple of the peak step (GMT_NVTX_PEAK_STEP, default 1 GiB):
//     "live bytes passed <size> (<bytes> B)";
//   - an NVTX counter per device, "live bytes (device N)" (device -1: host memory), sampled at the end of each
//     flush that changed it, so Nsight Systems draws the curve beside the kernels (NVTX's counters extension:
//     the tool must support it; without a tool the samples go nowhere).
// The markers are emitted by the thread that writes the trace, when it writes the event: up to one flush
// interval (200 ms) after the allocation, never on the app's hot path. Live bytes are counted here from the
// written events (device, managed and pinned allocations minus their frees, VMM physical memory from create to
// release), so the hooks pay nothing for them. A counter sample is taken when the flush ends, so its time
// stamp (the tool's) is up to one flush interval after the allocations it counts.
//
// This file holds the library's one NVTX copy (the full nvtx3 implementation). It attaches to this library
// directly, as a static injection (NVTX's InitializeInjectionNvtx2_fnptr), not through NVTX_INJECTION64_PATH:
// loading ourselves with dlopen while the process exits would run our constructors again. Our handlers see
// the guard (the writer thread holds it always; every emission here takes it) and the domain is ours, so they
// only forward to the chained tool: our annotations reach Nsight Systems (or any chained tool), never the
// trace's ranges table. Without a chained tool they go nowhere.
//
// Exit, as glibc runs it (seen with LD_DEBUG=files): exit() destroys the exiting thread's thread_local objects,
// then runs the atexit handlers registered since main began (newest first), then _dl_fini finalizes every
// library, the latest loaded first: the chained tool (loaded by us with dlopen during the run) before us; the
// atexit handlers our constructors registered run in there too, after our destructors. So our shutdown work
// is shown by an atexit handler registered during the run (on_chain_ready), which stops the writer thread and
// lets it make the last flush; nothing is emitted once our destructor ran (the tool is finalized by then), and
// nothing on the exiting thread. A process that exits before its trace is even created emits nothing.
#define NVTX_SUPPORT_DYNAMIC_INJECTION_LIBRARY 0
#define NVTX_AS_SYSTEM_HEADER  // its loader, without the dynamic part, leaves a variable unused
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCounters.h>

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <unordered_map>

#include "nvtx/nvtx_settings.h"
#include "recorder/event.h"
#include "recorder/guard.h"
#include "recorder/recorder.h"
#include "recorder/trace_writer.h"
#include "schema/environment.h"

extern "C" int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table);  // nvtx/injection.cpp
extern "C" int InitializeInjectionNvtxExtension(void* module_info);                  // nvtx/injection.cpp

namespace gmt::nvtx {
namespace {

using schema::EventKind;
using schema::MemoryKind;

constexpr uint32_t kColor = 0xFF76B900;

// Set by our destructor. A chained tool was loaded after us, so the loader has finalized it by then: from now
// on nothing is sent to it.
std::atomic<bool> g_finalizing{false};

std::string human_bytes(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  char text[48];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.2f %s", value, kUnits[unit]);
  return text;
}

// The error an allocation returned, by the layer that saw it: cudaError_t for the runtime hooks, CUresult for
// the driver-level backends (the same code for out of memory).
std::string error_text(const recorder::EventRecord& e) {
  std::string name = "error";
  if (e.call.error == recorder::kOutOfMemoryError) {
    name = e.source == schema::Source::RuntimeHook ? "cudaErrorMemoryAllocation" : "CUDA_ERROR_OUT_OF_MEMORY";
  }
  return name + " (" + std::to_string(e.call.error) + ")";
}

class Emitter final : public recorder::WriterObserver {
 public:
  explicit Emitter(uint64_t peak_step) : peak_step_(peak_step), next_peak_(peak_step) {}

  void on_create_begin() override { create_pushed_ = push(Range::Startup, false, 0); }
  void on_create_end() override {
    if (create_pushed_) pop();
    create_pushed_ = false;
  }

  // A flush that wrote something is a "flush" range; once the process exits, every flush is "shutdown" work.
  void on_batch_begin(size_t events) override {
    bool exiting = exiting_.load(std::memory_order_acquire);
    batch_pushed_ = (events > 0 || exiting) && push(exiting ? Range::Shutdown : Range::Flush, true, events);
  }
  void on_batch_end() override {
    sample_counters();
    if (batch_pushed_) pop();
    batch_pushed_ = false;
  }

  void on_event(const recorder::EventRecord& e) override {
    switch (e.kind) {
      case EventKind::AllocFailed:
        mark("allocation failed: " + std::to_string(e.call.size) + " B, " + error_text(e), e.call.size);
        break;
      case EventKind::Alloc:
        if (e.memory_kind == MemoryKind::Device || e.memory_kind == MemoryKind::Managed ||
            e.memory_kind == MemoryKind::HostPinned) {
          add(live_[e.call.address], e.call.size, e.device);
        }
        break;
      case EventKind::Free: remove(live_, e.call.address); break;
      case EventKind::VmmCreate: add(physical_[e.call.handle], e.call.size, e.device); break;
      case EventKind::VmmRelease: remove(physical_, e.call.handle); break;
      default: break;
    }
  }

  // At exit (an atexit handler that runs before the loader finalizes the chained tool): stop the writer thread,
  // whose last flush is the "shutdown" range, then fall silent. Nothing is emitted on the exiting thread itself:
  // exit() has destroyed its thread_local objects already, the chained tool's included.
  void shutdown() {
    exit_thread_.store(recorder::current_thread_id(), std::memory_order_relaxed);
    exiting_.store(true, std::memory_order_release);
    recorder::finish(/*close=*/false);
    stopped_.store(true, std::memory_order_release);
  }

 private:
  // The domain and our range names, made on first use (the first emission initializes our NVTX copy).
  struct Names {
    nvtxDomainHandle_t domain;
    nvtxStringHandle_t startup, flush, shutdown;

    static const Names& get() {
      static const Names names = [] {
        recorder::HookScope scope;
        Names n{};
        n.domain = nvtxDomainCreateA("gpumemtrace");
        n.startup = nvtxDomainRegisterStringA(n.domain, "start-up: create trace");
        n.flush = nvtxDomainRegisterStringA(n.domain, "flush");
        n.shutdown = nvtxDomainRegisterStringA(n.domain, "shutdown");
        return n;
      }();
      return names;
    }
  };

  bool silent() const {
    if (stopped_.load(std::memory_order_acquire) || g_finalizing.load(std::memory_order_acquire)) return true;
    return exiting_.load(std::memory_order_acquire) &&
           recorder::current_thread_id() == exit_thread_.load(std::memory_order_relaxed);
  }

  enum class Range { Startup, Flush, Shutdown };

  bool push(Range range, bool with_payload, uint64_t payload) {
    if (silent()) return false;
    recorder::HookScope scope;
    const Names& names = Names::get();
    nvtxStringHandle_t name = range == Range::Startup ? names.startup
                              : range == Range::Flush ? names.flush
                                                      : names.shutdown;
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = kColor;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = name;
    if (with_payload) {
      a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
      a.payload.ullValue = payload;
    }
    nvtxDomainRangePushEx(Names::get().domain, &a);
    return true;
  }

  void pop() {
    if (g_finalizing.load(std::memory_order_acquire)) return;  // pushed, but the tool is gone now
    recorder::HookScope scope;
    nvtxDomainRangePop(Names::get().domain);
  }

  void mark(const std::string& message, uint64_t payload) {
    if (silent()) return;
    recorder::HookScope scope;
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = kColor;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = message.c_str();
    a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    a.payload.ullValue = payload;
    nvtxDomainMarkEx(Names::get().domain, &a);
  }

  struct Held {
    uint64_t bytes = 0;
    int64_t device = -1;
  };
  using HeldMap = std::unordered_map<uint64_t, Held>;

  void add(Held& slot, uint64_t size, int64_t device) {
    // An address seen again without its free: the newer allocation counts.
    if (slot.bytes != 0) {
      live_bytes_ -= slot.bytes;
      device_bytes_[slot.device] -= slot.bytes;
    }
    slot = Held{size, device};
    live_bytes_ += size;
    device_bytes_[device] += size;
    if (peak_step_ == 0 || live_bytes_ < next_peak_) return;
    uint64_t reached = live_bytes_ / peak_step_ * peak_step_;
    mark("live bytes passed " + human_bytes(reached) + " (" + std::to_string(reached) + " B)", live_bytes_);
    next_peak_ = reached + peak_step_;
  }

  void remove(HeldMap& map, uint64_t key) {
    auto it = map.find(key);
    if (it == map.end()) return;
    live_bytes_ -= it->second.bytes;
    device_bytes_[it->second.device] -= it->second.bytes;
    map.erase(it);
  }

  // One counter per device, registered on its first sample; a device's counter is sampled only when its live
  // bytes changed since the last sample. A counter the tool did not register (no tool, or one without the
  // counters extension: NVTX returns 0) is never sampled.
  struct Counter {
    uint64_t id = 0;
    bool registered = false;
    uint64_t last = 0;
    bool sampled = false;
  };

  void sample_counters() {
    if (silent()) return;
    recorder::HookScope scope;
    for (const auto& [device, bytes] : device_bytes_) {
      Counter& counter = counters_[device];
      if (counter.sampled && counter.last == bytes) continue;
      if (!counter.registered) {
        counter.registered = true;
        std::string name = "live bytes (device " + std::to_string(device) + ")";
        nvtxCounterAttr_t attr{};
        attr.structSize = sizeof attr;
        attr.schemaId = NVTX_PAYLOAD_ENTRY_TYPE_INT64;
        attr.name = name.c_str();
        attr.description = "bytes of device, managed, pinned and VMM physical memory allocated and not freed";
        attr.scopeId = NVTX_SCOPE_CURRENT_SW_PROCESS;
        attr.counterId = NVTX_COUNTER_ID_NONE;
        counter.id = nvtxCounterRegister(Names::get().domain, &attr);
      }
      if (counter.id == NVTX_COUNTER_ID_NONE) continue;
      nvtxCounterSampleInt64(Names::get().domain, counter.id, static_cast<int64_t>(bytes));
      counter.last = bytes;
      counter.sampled = true;
    }
  }

  const uint64_t peak_step_;
  uint64_t next_peak_;
  uint64_t live_bytes_ = 0;
  HeldMap live_;                              // address -> bytes and device
  HeldMap physical_;                          // VMM handle -> bytes and device
  std::map<int64_t, uint64_t> device_bytes_;  // device -> live bytes
  std::map<int64_t, Counter> counters_;
  // Per writer call; the writer's lock serializes the calls (writer thread, or the flush at exit).
  bool batch_pushed_ = false;
  bool create_pushed_ = false;
  std::atomic<bool> exiting_{false};
  std::atomic<uint32_t> exit_thread_{0};
  std::atomic<bool> stopped_{false};
};

Emitter* g_emitter = nullptr;  // leaked: the writer may flush until the library's destructor

void shutdown_at_exit() { g_emitter->shutdown(); }

__attribute__((constructor)) void enable_from_environment() {
  static bool done = false;  // the loader may run constructors again (see is_this_library in injection.cpp)
  if (done) return;
  done = true;
  const char* emit = getenv(schema::env::kNvtxEmit);
  if (!emit || *emit != '1') return;
  uint64_t step = kDefaultPeakStep;
  if (const char* v = getenv(schema::env::kNvtxPeakStep); v && *v) step = std::strtoull(v, nullptr, 10);
  g_emitter = new Emitter(step);
  InitializeInjectionNvtx2_fnptr = &InitializeInjectionNvtx2;  // our copy's static injection: ourselves
  // Its extensions (the counters) likewise: our extension entry hands each module to the chained tool.
  InitializeInjectionNvtxExtension_fnptr =
      reinterpret_cast<NvtxExtInitializeInjectionFunc_t>(&InitializeInjectionNvtxExtension);
  recorder::set_writer_observer(g_emitter);
}

__attribute__((destructor)) void stop_at_unload() { g_finalizing.store(true, std::memory_order_release); }

}  // namespace

// Called when the chained tool is initialized: during the run, so this exit handler runs before _dl_fini
// finalizes the tool (see the top of this file). It does the exit flush itself (recorder::finish may be called
// more than once) and silences emission for what follows.
void on_chain_ready() {
  static std::atomic<bool> registered{false};
  if (g_emitter && !g_finalizing.load(std::memory_order_acquire) && !registered.exchange(true)) {
    std::atexit(shutdown_at_exit);
  }
}

}  // namespace gmt::nvtx
