// Which of the driver queries the profiler makes are forbidden while a stream captures a graph in global mode
// (each one is tried inside a capture, on the capturing thread and on another thread; a forbidden call
// invalidates the capture), and whether the relaxed capture mode that recorder/capture_safety.h switches to
// makes each of them safe. Prints one line per query and place:
//   probe <query> <thread> plain=<ok|invalidated> relaxed=<ok|invalidated>
// and exits 0; the GPU suite (tests/gpu/test_gpu_graphs.py) requires relaxed=ok everywhere and records the rest.
// Driver API only (linked with -lcuda), so that nothing but the probed call happens inside the capture.
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

namespace {

#define PROBE_CHECK(call)                                                              \
  do {                                                                                 \
    CUresult probe_err = (call);                                                       \
    if (probe_err != CUDA_SUCCESS) {                                                   \
      const char* name = nullptr;                                                      \
      cuGetErrorName(probe_err, &name);                                                \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, name); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

CUdevice g_device;
CUcontext g_context;
CUdeviceptr g_plain;  // a cuMemAlloc'd buffer, for the pointer queries

struct Query {
  const char* name;
  std::function<void()> call;
};

void query_calls(std::vector<Query>& queries) {
  queries.push_back({"cuCtxGetCurrent", [] {
                       CUcontext c;
                       cuCtxGetCurrent(&c);
                     }});
  queries.push_back({"cuCtxGetDevice", [] {
                       CUdevice d;
                       cuCtxGetDevice(&d);
                     }});
  queries.push_back({"cuMemPoolGetAttribute", [] {
                       CUmemoryPool pool;
                       cuuint64_t value = 0;
                       if (cuDeviceGetMemPool(&pool, g_device) == CUDA_SUCCESS) {
                         cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &value);
                         cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &value);
                       }
                     }});
  queries.push_back({"cuMemGetInfo", [] {
                       size_t f, t;
                       cuMemGetInfo(&f, &t);
                     }});
  queries.push_back({"cuDeviceGetName", [] {
                       char n[128];
                       cuDeviceGetName(n, sizeof n, g_device);
                     }});
  queries.push_back({"cuDeviceTotalMem", [] {
                       size_t t;
                       cuDeviceTotalMem(&t, g_device);
                     }});
  queries.push_back({"cuPointerGetAttribute", [] {
                       int ordinal = -1;
                       cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, g_plain);
                     }});
  queries.push_back({"cuMemGetAddressRange", [] {
                       CUdeviceptr b;
                       size_t s;
                       cuMemGetAddressRange(&b, &s, g_plain);
                     }});
  queries.push_back({"cuDeviceGetGraphMemAttribute", [] {
                       cuuint64_t value = 0;
                       cuDeviceGetGraphMemAttribute(g_device, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &value);
                     }});
}

// Runs `call` where `elsewhere` says, inside a global-mode capture that allocates and frees; true when the capture
// survived.
bool capture_survives(const std::function<void()>& call, bool elsewhere, bool relaxed) {
  CUstream stream;
  PROBE_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  PROBE_CHECK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUdeviceptr a = 0;
  CUresult alloc = cuMemAllocAsync(&a, 1 << 20, stream);
  auto probed = [&] {
    cuCtxSetCurrent(g_context);
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (relaxed) cuThreadExchangeStreamCaptureMode(&mode);
    call();
    if (relaxed) cuThreadExchangeStreamCaptureMode(&mode);
  };
  if (elsewhere) {
    std::thread(probed).join();
  } else {
    probed();
  }
  if (alloc == CUDA_SUCCESS) cuMemFreeAsync(a, stream);
  CUgraph graph = nullptr;
  CUresult end = cuStreamEndCapture(stream, &graph);
  if (graph) cuGraphDestroy(graph);
  PROBE_CHECK(cuStreamDestroy(stream));
  return alloc == CUDA_SUCCESS && end == CUDA_SUCCESS;
}

}  // namespace

int main() {
  PROBE_CHECK(cuInit(0));
  PROBE_CHECK(cuDeviceGet(&g_device, 0));
  PROBE_CHECK(cuDevicePrimaryCtxRetain(&g_context, g_device));
  PROBE_CHECK(cuCtxSetCurrent(g_context));
  PROBE_CHECK(cuMemAlloc(&g_plain, 1 << 20));
  std::vector<Query> queries;
  query_calls(queries);
  if (!capture_survives([] {}, false, false)) {
    std::fprintf(stderr, "capture_probe: an empty capture failed: nothing can be probed\n");
    return 1;
  }
  for (const Query& q : queries) {
    for (bool elsewhere : {false, true}) {
      bool plain = capture_survives(q.call, elsewhere, false);
      bool relaxed = capture_survives(q.call, elsewhere, true);
      std::printf("probe %s %s plain=%s relaxed=%s\n", q.name, elsewhere ? "other-thread" : "capturing-thread",
                  plain ? "ok" : "invalidated", relaxed ? "ok" : "invalidated");
    }
  }
  PROBE_CHECK(cuMemFree(g_plain));
  return 0;
}
