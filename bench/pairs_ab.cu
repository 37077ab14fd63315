// Allocation+free pairs with recording on and off in alternation inside one profiled process: the paired
// ratio of the two is the profiler's cost per pair, free of what moves between processes (device timings of
// separate runs differ by 30-80% on the GPU machines, docs/benchmarks.md). Blocks of PAIRS pairs alternate
// on, off, off, on (ABBA: a drift within the run cancels); each on block is compared with its neighbour off
// block. Recording is switched with gmt_set_recording_paused (recorder/pause.cpp), so this program must run
// under `gpumemtrace run`.
//
// "Off" is nearly raw: the hooks still run and pass the call through (a guard check); under the CUPTI backend a
// pause also switches CUPTI's driver callbacks off (recorder/backend.h, switch_capture), so the ratio includes
// CUPTI's own dispatch.
//
// Usage: pairs_ab [blocks=40] [pairs_per_block=2000] [depth=12]
//   depth: the call site is this many frames below main (real programs allocate deep; the walk grows with it).
// Prints one line per case: "CASE: on X ns, off Y ns, ratio R (...)". The 8-thread case runs a block on 8
// threads at once (each its own stream, an eighth of the pairs): ns per pair of the whole block's wall time.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "cuda_check.h"

namespace {

using PauseFn = int (*)(int);
constexpr int kLive = 64;  // allocations live at a time, as in bench/alloc_pairs

struct Case {
  const char* name;
  bool async;
  size_t size;
  int pairs_divisor;  // cudaMalloc pairs are slower: fewer per block; each of `threads` runs a share
  int threads = 1;
};

struct Loop {
  const Case* c;
  cudaStream_t stream;
  int pairs;
  std::vector<void*>* live;
};

__attribute__((noinline)) double run_block(const Loop& loop) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < loop.pairs; ++i) {
    void*& slot = (*loop.live)[i % kLive];
    if (loop.c->async) {
      if (slot) CHECK(cudaFreeAsync(slot, loop.stream));
      CHECK(cudaMallocAsync(&slot, loop.c->size, loop.stream));
    } else {
      if (slot) CHECK(cudaFree(slot));
      CHECK(cudaMalloc(&slot, loop.c->size));
    }
  }
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / loop.pairs;
}

__attribute__((noinline)) double descend(const Loop& loop, int depth) {
  double ns = depth <= 0 ? run_block(loop) : descend(loop, depth - 1);
  asm volatile("" ::: "memory");  // not a tail call: every level keeps its frame
  return ns;
}

// Threads that run one block together when told to, so that a block's wall time covers them all and the
// recording switch (process-wide) happens between blocks, never inside one.
class Crew {
 public:
  Crew(std::vector<Loop> loops, int depth) : loops_(std::move(loops)), depth_(depth) {
    for (size_t i = 0; i < loops_.size(); ++i) threads_.emplace_back([this, i] { work(i); });
  }
  ~Crew() {
    {
      std::lock_guard lock(mutex_);
      quit_ = true;
    }
    start_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  // ns per pair: the block's wall time over every thread's pairs.
  double run_block() {
    auto start = std::chrono::steady_clock::now();
    std::unique_lock lock(mutex_);
    ++generation_;
    done_ = 0;
    start_.notify_all();
    finished_.wait(lock, [this] { return done_ == loops_.size(); });
    double pairs = static_cast<double>(loops_[0].pairs) * static_cast<double>(loops_.size());
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / pairs;
  }

 private:
  void work(size_t i) {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        start_.wait(lock, [&] { return quit_ || generation_ != seen; });
        if (quit_) return;
        seen = generation_;
      }
      descend(loops_[i], depth_);
      std::lock_guard lock(mutex_);
      if (++done_ == loops_.size()) finished_.notify_one();
    }
  }
  std::vector<Loop> loops_;
  int depth_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable start_, finished_;
  uint64_t generation_ = 0;
  size_t done_ = 0;
  bool quit_ = false;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

}  // namespace

int main(int argc, char** argv) {
  const int blocks = argc > 1 ? std::atoi(argv[1]) : 40;
  const int pairs = argc > 2 ? std::atoi(argv[2]) : 2000;
  const int depth = argc > 3 ? std::atoi(argv[3]) : 12;
  if (blocks < 4 || blocks % 4 != 0 || pairs <= 0 || depth < 0) {
    std::fprintf(stderr, "usage: pairs_ab [blocks (a multiple of 4)] [pairs_per_block>0] [depth>=0]\n");
    return 2;
  }
  auto pause = reinterpret_cast<PauseFn>(dlsym(RTLD_DEFAULT, "gmt_set_recording_paused"));
  if (!pause) {
    std::fprintf(stderr, "pairs_ab: no gmt_set_recording_paused in this process: run it under gpumemtrace run\n");
    return 2;
  }
  CHECK(cudaFree(nullptr));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  const Case cases[] = {{"cudaMalloc+cudaFree 256 B", false, 256, 4},
                        {"cudaMallocAsync+cudaFreeAsync 256 B", true, 256, 1},
                        {"cudaMalloc+cudaFree 1 MiB", false, 1 << 20, 4},
                        {"cudaMallocAsync+cudaFreeAsync 1 MiB", true, 1 << 20, 1},
                        {"8 threads cudaMallocAsync+cudaFreeAsync 256 B", true, 256, 8, 8}};
  for (const Case& c : cases) {
    std::vector<std::vector<void*>> live(c.threads, std::vector<void*>(kLive, nullptr));
    std::vector<cudaStream_t> streams(c.threads, stream);
    for (int t = 1; t < c.threads; ++t) CHECK(cudaStreamCreate(&streams[t]));
    std::vector<Loop> loops;
    for (int t = 0; t < c.threads; ++t) {
      loops.push_back({&c, streams[t], std::max(1, pairs / c.pairs_divisor), &live[t]});
    }
    std::optional<Crew> crew;
    if (c.threads > 1) crew.emplace(loops, depth);
    auto block = [&] { return crew ? crew->run_block() : descend(loops[0], depth); };
    for (int warm = 0; warm < 4; ++warm) {  // pools, caches and the walker's rules, in both states
      pause(warm % 2);
      block();
    }
    std::vector<double> on, off, ratios;
    for (int b = 0; b < blocks; b += 2) {
      // ABBA: on-off, then off-on.
      bool on_first = (b / 2) % 2 == 0;
      double first, second;
      pause(on_first ? 0 : 1);
      first = block();
      pause(on_first ? 1 : 0);
      second = block();
      double on_ns = on_first ? first : second, off_ns = on_first ? second : first;
      on.push_back(on_ns);
      off.push_back(off_ns);
      ratios.push_back(on_ns / off_ns);
    }
    pause(0);
    for (int t = 0; t < c.threads; ++t) {
      for (void*& p : live[t]) {
        if (!p) continue;
        if (c.async)
          CHECK(cudaFreeAsync(p, streams[t]));
        else
          CHECK(cudaFree(p));
      }
      if (t > 0) {
        CHECK(cudaStreamSynchronize(streams[t]));
        CHECK(cudaStreamDestroy(streams[t]));
      }
    }
    double mean = 0, var = 0;
    for (double r : ratios) mean += r;
    mean /= static_cast<double>(ratios.size());
    for (double r : ratios) var += (r - mean) * (r - mean);
    double ci = 1.96 * std::sqrt(var / static_cast<double>(ratios.size() - 1) / static_cast<double>(ratios.size()));
    std::printf("%s: on %.0f ns, off %.0f ns, ratio %.3f (median of %zu pairs of blocks; middle half %.3f-%.3f; "
                "mean %.3f +- %.3f)\n",
                c.name, median(on), median(off), median(ratios), ratios.size(), quantile(ratios, 0.25),
                quantile(ratios, 0.75), mean, ci);
    std::fflush(stdout);
  }
  CHECK(cudaStreamSynchronize(stream));
  CHECK(cudaStreamDestroy(stream));
  return 0;
}
