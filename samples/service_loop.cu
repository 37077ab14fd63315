// A time-compressed inference service for `run --aggregate` (docs/trace-format.md "Aggregate traces"): a model
// loaded once, then REQUESTS requests, each an NVTX range "request" that allocates and frees a variable number of
// temporaries from STACKS distinct call sites (each its own call stack), and a slow leak hidden in one of them:
// every LEAK_EVERY-th request keeps one 64 KiB buffer (a KV cache entry never evicted). Half of the leaked
// buffers are freed at shutdown, so the run ends with a known leak and a known growth:
//
//   service_loop [REQUESTS=2000] [STACKS=1000] [LEAK_EVERY=50] [SLEEP_US_PER_REQUEST=0] [--oom-at-end]
//
// Prints "truth: leaked_bytes=N leaked_allocations=M failed_allocations=F" and
// "truth: service events=E kept_leaks=K leak_bytes_each=B requests=R". --oom-at-end asks for more than any device
// has once the requests are done (a failure with the live set as its context).
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "sample_common.h"

namespace {

constexpr size_t kLeakBytes = 64 * 1024;
constexpr int kMaxStacks = 1024;
unsigned long long g_events = 0;

// One allocation site per N: each instantiation has its own return address, so STACKS sites are STACKS stacks.
template <int N>
__attribute__((noinline)) void* allocate_at_site(size_t bytes) {
  void* p = nullptr;
  SAMPLE_CHECK(cudaMalloc(&p, bytes));
  ++g_events;
  asm volatile("" ::: "memory");  // keeps the instantiations apart
  return p;
}

using SiteFn = void* (*)(size_t);

template <size_t... I>
std::vector<SiteFn> make_sites(std::index_sequence<I...>) {
  return {&allocate_at_site<static_cast<int>(I)>...};
}

__attribute__((noinline)) void* keep_kv_entry() {
  void* p = nullptr;
  SAMPLE_CHECK(cudaMalloc(&p, kLeakBytes));  // LEAK-SITE: keep_kv_entry
  ++g_events;
  return p;
}

void release(void* p) {
  SAMPLE_CHECK(cudaFree(p));
  ++g_events;
}

}  // namespace

int main(int argc, char** argv) {
  bool oom_at_end = false;
  std::vector<const char*> positional;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--oom-at-end") == 0) {
      oom_at_end = true;
    } else {
      positional.push_back(argv[i]);
    }
  }
  const long requests = positional.size() > 0 ? std::atol(positional[0]) : 2000;
  const int stacks = positional.size() > 1 ? std::atoi(positional[1]) : 1000;
  const long leak_every = positional.size() > 2 ? std::atol(positional[2]) : 50;
  const long sleep_us = positional.size() > 3 ? std::atol(positional[3]) : 0;
  if (stacks < 1 || stacks > kMaxStacks || requests < 0 || leak_every < 1) {
    std::fprintf(stderr, "usage: service_loop [REQUESTS] [STACKS 1..%d] [LEAK_EVERY] [SLEEP_US] [--oom-at-end]\n",
                 kMaxStacks);
    return 2;
  }
  const std::vector<SiteFn> sites = make_sites(std::make_index_sequence<kMaxStacks>{});
  LeakTruth truth;
  void* weights = nullptr;
  SAMPLE_CHECK(cudaMalloc(&weights, 16 << 20));  // the model
  ++g_events;
  std::vector<void*> kv_cache;
  std::vector<void*> live;
  unsigned long long state = 88172645463325252ull;  // xorshift: the same requests every run
  auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  for (long r = 0; r < requests; ++r) {
    nvtxRangePushA("request");
    const int temporaries = 8 + static_cast<int>(next() % 24);  // variable-length requests
    for (int t = 0; t < temporaries; ++t) {
      const int site = static_cast<int>(next() % static_cast<unsigned>(stacks));
      live.push_back(sites[site](4096 * (1 + next() % 64)));
    }
    if ((r + 1) % leak_every == 0) kv_cache.push_back(keep_kv_entry());
    for (void* p : live) release(p);
    live.clear();
    nvtxRangePop();
    if (sleep_us > 0) usleep(static_cast<useconds_t>(sleep_us));
  }
  if (oom_at_end) {
    void* too_big = nullptr;
    if (cudaMalloc(&too_big, size_t{1} << 50) != cudaSuccess) ++truth.failed_allocations;
    ++g_events;
  }
  // Shutdown: half of the KV cache is released, the rest leaks.
  const size_t kept = kv_cache.size() - kv_cache.size() / 2;
  for (size_t i = kept; i < kv_cache.size(); ++i) release(kv_cache[i]);
  for (size_t i = 0; i < kept; ++i) truth.leak(kLeakBytes);
  release(weights);
  std::printf("truth: service events=%llu kept_leaks=%zu leak_bytes_each=%zu requests=%ld\n", g_events, kept,
              kLeakBytes, requests);
  truth.print();
  return 0;
}
