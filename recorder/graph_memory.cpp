#include "recorder/graph_memory.h"

#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "recorder/cache_hints.h"
#include "recorder/capture_safety.h"
#include "recorder/recorder.h"

namespace gmt::recorder {
namespace {

using schema::Api;
using schema::EventKind;
using schema::MemoryKind;

// Read from the libcuda the app loaded; no backend wraps them, so these are the driver's own.
struct GraphQueries {
  CUresult (*get_nodes)(CUgraph, CUgraphNode*, size_t*) = nullptr;
  CUresult (*node_type)(CUgraphNode, CUgraphNodeType*) = nullptr;
  CUresult (*alloc_params)(CUgraphNode, CUDA_MEM_ALLOC_NODE_PARAMS*) = nullptr;
  CUresult (*free_params)(CUgraphNode, CUdeviceptr*) = nullptr;
  CUresult (*child_graph)(CUgraphNode, CUgraph*) = nullptr;
  CUresult (*pool_attribute)(CUdevice, CUgraphMem_attribute, void*) = nullptr;
};

const GraphQueries* queries() {
  static const GraphQueries* resolved = [] {
    void* cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!cuda) return static_cast<GraphQueries*>(nullptr);
    auto* q = new GraphQueries;
    auto find = [cuda](auto& slot, const char* name) {
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(cuda, name));
    };
    find(q->get_nodes, "cuGraphGetNodes");
    find(q->node_type, "cuGraphNodeGetType");
    find(q->alloc_params, "cuGraphMemAllocNodeGetParams");
    find(q->free_params, "cuGraphMemFreeNodeGetParams");
    find(q->child_graph, "cuGraphChildGraphNodeGetGraph");
    find(q->pool_attribute, "cuDeviceGetGraphMemAttribute");
    dlclose(cuda);  // the app's reference keeps it loaded
    return q;
  }();
  return resolved;
}

struct AllocNode {
  uint64_t address = 0;
  uint64_t size = 0;
  int16_t device = -1;
  uint32_t stack_id = 0;  // where the node was made; 0: not seen (then the launch's stack is taken)
};

struct ExecMemory {
  std::vector<AllocNode> allocs;
  std::vector<uint64_t> frees;
  bool auto_free = false;  // CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH
};

// All under g_mutex, never destroyed (static destructors may still launch graphs). Instantiations, launches and
// node creation take it; frees outside graphs only while a graph allocation is live (g_live_count).
std::mutex g_mutex;
auto* g_execs = new std::unordered_map<uint64_t, ExecMemory>;
auto* g_node_stacks = new std::unordered_map<uint64_t, uint32_t>;  // node address -> stack id
auto* g_live = new std::unordered_map<uint64_t, uint64_t>;         // live graph allocation -> its exec
std::atomic<size_t> g_live_count{0};

// A fork while another thread holds the mutex must not leave it held in the child.
void lock_for_fork() { g_mutex.lock(); }
void unlock_after_fork() { g_mutex.unlock(); }
std::once_flag g_atfork_once;

std::unique_lock<std::mutex> lock_graphs() {
  std::call_once(g_atfork_once, [] { pthread_atfork(lock_for_fork, unlock_after_fork, unlock_after_fork); });
  return std::unique_lock(g_mutex);
}

// A graph's memory nodes, child graphs included (bounded: a graph cannot contain itself, but a bad handle can loop).
void collect(const GraphQueries& q, CUgraph graph, ExecMemory& out, int depth) {
  size_t count = 0;
  if (depth > 16 || q.get_nodes(graph, nullptr, &count) != CUDA_SUCCESS || count == 0) return;
  std::vector<CUgraphNode> nodes(count);
  if (q.get_nodes(graph, nodes.data(), &count) != CUDA_SUCCESS) return;
  for (size_t i = 0; i < count; ++i) {
    CUgraphNodeType type;
    if (q.node_type(nodes[i], &type) != CUDA_SUCCESS) continue;
    if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && q.alloc_params) {
      CUDA_MEM_ALLOC_NODE_PARAMS params{};
      if (q.alloc_params(nodes[i], &params) != CUDA_SUCCESS) continue;
      AllocNode node{params.dptr, params.bytesize, -1, 0};
      if (params.poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        node.device = static_cast<int16_t>(params.poolProps.location.id);
      }
      auto stack = g_node_stacks->find(node.address);
      if (stack != g_node_stacks->end()) node.stack_id = stack->second;
      out.allocs.push_back(node);
    } else if (type == CU_GRAPH_NODE_TYPE_MEM_FREE && q.free_params) {
      CUdeviceptr address = 0;
      if (q.free_params(nodes[i], &address) == CUDA_SUCCESS) out.frees.push_back(address);
    } else if (type == CU_GRAPH_NODE_TYPE_GRAPH && q.child_graph) {
      CUgraph child = nullptr;
      if (q.child_graph(nodes[i], &child) == CUDA_SUCCESS) collect(q, child, out, depth + 1);
    }
  }
}

void record_launch_free(const DriverCall& call, uint64_t address, int16_t device) {
  DriverCall on_device = call;
  on_device.driver_api = Api::graphMemFree;
  if (device >= 0) on_device.device = device;
  EventRecord e = make_driver_event(on_device, EventKind::Free, MemoryKind::Device);
  e.api = Api::graphMemFree;
  e.call.address = address;
  e.call.error = 0;
  record(e, /*take_stack=*/false);
  if (g_live->erase(address)) g_live_count.fetch_sub(1, std::memory_order_relaxed);
}

// The graph memory pool's reserved and used bytes, at most once per 10 ms per thread (as pool_sampler.h).
thread_local uint64_t t_last_graph_pool_sample_ns __attribute__((tls_model("initial-exec"))) = 0;

void sample_graph_pool(const GraphQueries& q, int16_t device, uint64_t now) {
  if (device < 0 || !q.pool_attribute || now - t_last_graph_pool_sample_ns < 10'000'000) return;
  RelaxedCaptureScope relaxed;  // not stream-ordered (capture_safety.h)
  cuuint64_t reserved = 0, used = 0;
  if (q.pool_attribute(device, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved) != CUDA_SUCCESS ||
      q.pool_attribute(device, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used) != CUDA_SUCCESS) {
    return;
  }
  t_last_graph_pool_sample_ns = now;
  EventRecord e;
  e.time_ns = now;
  e.thread_id = current_thread_id();
  e.kind = EventKind::PoolUsage;
  e.device = device;
  e.pool_usage = PoolUsagePayload{schema::kGraphMemoryPool, reserved, used};
  record(e, /*take_stack=*/false);
}

}  // namespace

void record_graph_alloc_node(const DriverCall& call, uint64_t address, uint64_t size) {
  EventRecord e = make_driver_event(call, EventKind::GraphAllocNode, MemoryKind::Device);
  e.call.address = address;
  e.call.size = size;
  record(e, /*take_stack=*/true);
  auto lock = lock_graphs();
  (*g_node_stacks)[address] = e.stack_id;
}

void note_graph_instantiated(uint64_t exec, uint64_t graph, uint64_t flags) {
  const GraphQueries* q = queries();
  if (!q || !q->get_nodes || !q->node_type || exec == 0) return;
  RelaxedCaptureScope relaxed;  // another stream may be capturing meanwhile
  auto lock = lock_graphs();
  ExecMemory memory;
  memory.auto_free = (flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) != 0;
  collect(*q, reinterpret_cast<CUgraph>(graph), memory, 0);
  if (memory.allocs.empty() && memory.frees.empty()) {
    g_execs->erase(exec);  // a reused handle of an exec destroyed earlier
    return;
  }
  (*g_execs)[exec] = std::move(memory);
}

void record_graph_launch(const DriverCall& call, uint64_t exec) {
  const GraphQueries* q = queries();
  if (!q) return;
  auto lock = lock_graphs();
  auto found = g_execs->find(exec);
  if (found == g_execs->end()) return;
  const ExecMemory& memory = found->second;
  // Auto-free on launch: what the previous launch allocated and nobody freed is freed first.
  if (memory.auto_free) {
    for (const AllocNode& node : memory.allocs) {
      auto live = g_live->find(node.address);
      if (live != g_live->end() && live->second == exec) record_launch_free(call, node.address, node.device);
    }
  }
  uint64_t now = 0;
  for (const AllocNode& node : memory.allocs) {
    DriverCall on_device = call;
    on_device.driver_api = Api::graphMemAlloc;
    if (node.device >= 0) on_device.device = node.device;
    EventRecord e = make_driver_event(on_device, EventKind::Alloc, MemoryKind::Device);
    e.api = Api::graphMemAlloc;
    e.call.address = node.address;
    e.call.size = node.size;
    e.call.error = 0;
    e.stack_id = node.stack_id;
    record(e, /*take_stack=*/node.stack_id == 0);
    now = e.time_ns;
    auto [live, inserted] = g_live->try_emplace(node.address, exec);
    if (inserted) {
      g_live_count.fetch_add(1, std::memory_order_relaxed);
    } else {
      live->second = exec;  // its free was not seen (another path freed it): live again from this launch
    }
  }
  for (uint64_t address : memory.frees) record_launch_free(call, address, call.device);
  if (!memory.allocs.empty()) sample_graph_pool(*q, memory.allocs.front().device, now);
}

void forget_graph_exec(uint64_t exec) {
  auto lock = lock_graphs();
  g_execs->erase(exec);
}

GMT_HOT void note_free_outside_graph(uint64_t address) {
  if (__builtin_expect(g_live_count.load(std::memory_order_relaxed) == 0, 1)) return;
  auto lock = lock_graphs();
  if (g_live->erase(address)) g_live_count.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace gmt::recorder
