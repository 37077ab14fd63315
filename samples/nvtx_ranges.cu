// A program with known NVTX annotations, for the NVTX capture tests (tests/nvtx/) and the range-cost bench.
// Every kind of call NVTX has for ranges and markers is made a known number of times:
//   - push/pop: "epoch" > "step" (x steps, one 1 MiB allocation each, freed except in step 2) > "load batch"
//     (domain "sample.io", a registered string: level 0 in its own domain), "ex range" (nvtxRangePushEx),
//     "wide ünïcødé ✓" (nvtxRangePushW), "worker" on a second thread (level 0 there), "left open" (never popped);
//   - start/end: "async copy" (A), "wide start" (W), "prefetch" (domain, ended on another thread),
//     "never ended" (never ended);
//   - markers: "begin" (A), "batch loaded" (domain, once per step), "wide mark" (W);
//   - one nvtxRangePop with nothing open.
// Usage: nvtx_ranges [--steps N] [--step-ms MS] [--print-levels] [--request-too-much] | nvtx_ranges --bench PAIRS
//   --step-ms makes each step last MS milliseconds (an app that runs long enough for periodic flushes);
//   --print-levels prints what each push/pop returned (NVTX: the 0-based level, negative when none);
//   --request-too-much also asks for 1 PiB once (a failed allocation, inside "epoch");
//   --bench times PAIRS nvtxRangePushA/nvtxRangePop pairs and prints ns per pair (wall and this thread's CPU).
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>

#include "sample_common.h"

namespace {

bool print_levels = false;
bool request_too_much = false;

void level(const char* what, int value) {
  if (print_levels) std::printf("level %s %d\n", what, value);
}

nvtxEventAttributes_t attributes() {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  return a;
}

int bench(long pairs) {
  for (int i = 0; i < 1000; ++i) {  // warm up: NVTX's initialization, our name cache
    nvtxRangePushA("bench");
    nvtxRangePop();
  }
  timespec cpu_start{}, cpu_end{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu_start);
  auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < pairs; ++i) {
    nvtxRangePushA("bench");
    nvtxRangePop();
  }
  double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu_end);
  double cpu_ns = (cpu_end.tv_sec - cpu_start.tv_sec) * 1e9 + (cpu_end.tv_nsec - cpu_start.tv_nsec);
  // Wall time includes waiting for a core (the trace writer runs beside the app); CPU time is this thread's own.
  std::printf("nvtx push/pop pairs: %ld, ns per pair: %.1f, cpu ns per pair: %.1f\n", pairs,
              ns / static_cast<double>(pairs), cpu_ns / static_cast<double>(pairs));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 4;
  int step_ms = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
      steps = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--step-ms") == 0 && i + 1 < argc)
      step_ms = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--print-levels") == 0)
      print_levels = true;
    else if (std::strcmp(argv[i], "--request-too-much") == 0)
      request_too_much = true;
    else if (std::strcmp(argv[i], "--bench") == 0 && i + 1 < argc)
      return bench(std::atol(argv[++i]));
  }
  LeakTruth truth;
  SAMPLE_CHECK(cudaFree(nullptr));

  nvtxDomainHandle_t io = nvtxDomainCreateA("sample.io");
  nvtxStringHandle_t load_batch = nvtxDomainRegisterStringA(io, "load batch");

  nvtxMarkA("begin");
  level("push epoch", nvtxRangePushA("epoch"));
  for (int s = 0; s < steps; ++s) {
    level("push step", nvtxRangePushA("step"));

    nvtxEventAttributes_t load = attributes();
    load.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    load.message.registered = load_batch;
    level("push load_batch", nvtxDomainRangePushEx(io, &load));
    void* batch = nullptr;
    SAMPLE_CHECK(cudaMalloc(&batch, 1 << 20));
    if (s == 2) {
      truth.leak(1 << 20);  // the step that leaks
    } else {
      SAMPLE_CHECK(cudaFree(batch));
    }
    if (step_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
    level("pop load_batch", nvtxDomainRangePop(io));

    nvtxEventAttributes_t loaded = attributes();
    loaded.messageType = NVTX_MESSAGE_TYPE_ASCII;
    loaded.message.ascii = "batch loaded";
    nvtxDomainMarkEx(io, &loaded);

    level("pop step", nvtxRangePop());
  }

  if (request_too_much) {
    void* huge = nullptr;
    if (cudaMalloc(&huge, size_t(1) << 50) != cudaErrorMemoryAllocation) {
      std::fprintf(stderr, "expected cudaErrorMemoryAllocation for 1 PiB\n");
      return 1;
    }
    cudaGetLastError();
    truth.failed_allocations += 1;
  }

  nvtxEventAttributes_t ex = attributes();
  ex.messageType = NVTX_MESSAGE_TYPE_ASCII;
  ex.message.ascii = "ex range";
  level("push ex", nvtxRangePushEx(&ex));
  level("pop ex", nvtxRangePop());

  level("push wide", nvtxRangePushW(L"wide \u00fcn\u00efc\u00f8d\u00e9 \u2713"));
  level("pop wide", nvtxRangePop());

  std::thread worker([] {
    level("push worker", nvtxRangePushA("worker"));
    level("pop worker", nvtxRangePop());
  });
  worker.join();

  nvtxRangeId_t copy = nvtxRangeStartA("async copy");
  void* staging = nullptr;
  SAMPLE_CHECK(cudaMalloc(&staging, 4096));
  SAMPLE_CHECK(cudaFree(staging));
  nvtxRangeEnd(copy);
  nvtxRangeEnd(nvtxRangeStartW(L"wide start"));

  nvtxEventAttributes_t prefetch_attributes = attributes();
  prefetch_attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  prefetch_attributes.message.ascii = "prefetch";
  nvtxRangeId_t prefetch = nvtxDomainRangeStartEx(io, &prefetch_attributes);
  std::thread ender([io, prefetch] { nvtxDomainRangeEnd(io, prefetch); });
  ender.join();
  nvtxRangeStartA("never ended");

  level("pop epoch", nvtxRangePop());
  level("pop none", nvtxRangePop());
  nvtxMarkW(L"wide mark");
  level("push left_open", nvtxRangePushA("left open"));

  std::printf("nvtx_ranges: %d steps\n", steps);
  truth.print();
  return 0;
}
