// An app that outruns the profiler on purpose: THREADS threads each do PAIRS cudaMalloc+cudaFree pairs as
// fast as they can, then the program prints what it knows, one "key: value" per line:
//   events        the allocation events it made (2 x threads x pairs), for the zero-loss check
//   loop_s        wall seconds of the allocation loop (under back-pressure: the writer's sustained rate)
//   loop_cpu_s    CPU seconds of the whole process (every thread) during the loop
//   vm_hwm_kib    peak resident memory of the process, vm_rss_kib its resident memory now, threads its
//                 thread count (from /proc/self/status, read after the loop, before exit: the profiler's
//                 writer thread and buffers are still there)
//   other_threads_cpu_s  CPU seconds (user+sys) of the threads still alive besides main after the loop: under
//                 gpumemtrace, the writer thread (robust on a loaded machine, where wall time is not)
// Usage: event_flood [threads=8] [pairs_per_thread=100000]. Run by bench/trace_throughput.py and
// bench/footprint.py, raw and under `gpumemtrace run --simulate`.
#include <cuda_runtime.h>
#include <dirent.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

void worker(int pairs, char* failed) {
  for (int i = 0; i < pairs; ++i) {
    void* p = nullptr;
    if (cudaMalloc(&p, 256 + (i % 7) * 512) != cudaSuccess || cudaFree(p) != cudaSuccess) {
      *failed = true;
      return;
    }
  }
}

void print_status_line(const char* field, const char* key) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return;
  char line[256];
  size_t length = std::strlen(field);
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, field, length) == 0 && line[length] == ':') {
      std::printf("%s: %lld\n", key, std::atoll(line + length + 1));
      break;
    }
  }
  std::fclose(f);
}

// CPU time of the threads other than the calling one, from schedstat (nanoseconds on a CPU: exact, where the
// tick-based utime/stime of /proc/.../stat is off by tens of percent on a VM).
double other_threads_cpu_s() {
  double total_ns = 0;
  long self = syscall(SYS_gettid);
  DIR* tasks = opendir("/proc/self/task");
  if (!tasks) return 0;
  while (dirent* entry = readdir(tasks)) {
    long tid = std::atol(entry->d_name);
    if (tid <= 0 || tid == self) continue;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/self/task/%ld/schedstat", tid);
    FILE* f = std::fopen(path, "r");
    if (!f) continue;
    unsigned long long on_cpu_ns = 0;
    if (std::fscanf(f, "%llu", &on_cpu_ns) == 1) total_ns += static_cast<double>(on_cpu_ns);
    std::fclose(f);
  }
  closedir(tasks);
  return total_ns / 1e9;
}

double process_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 8;
  int pairs = argc > 2 ? std::atoi(argv[2]) : 100000;
  if (threads < 1 || pairs < 0) {
    std::fprintf(stderr, "usage: event_flood [threads>=1] [pairs_per_thread>=0]\n");
    return 2;
  }
  void* warm = nullptr;  // create the context (and the profiler's writer) before timing
  if (cudaMalloc(&warm, 256) != cudaSuccess || cudaFree(warm) != cudaSuccess) return 1;
  std::vector<char> failed(threads, 0);
  double cpu_start = process_cpu_s();
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker, pairs, &failed[t]);
  for (auto& th : pool) th.join();
  double loop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double loop_cpu_s = process_cpu_s() - cpu_start;
  for (char f : failed) {
    if (f) {
      std::fprintf(stderr, "event_flood: an allocation failed\n");
      return 1;
    }
  }
  std::printf("events: %llu\n", 2ull * threads * pairs + 2);
  std::printf("loop_s: %.4f\n", loop_s);
  std::printf("loop_cpu_s: %.4f\n", loop_cpu_s);
  print_status_line("VmHWM", "vm_hwm_kib");
  print_status_line("VmRSS", "vm_rss_kib");
  print_status_line("Threads", "threads");
  std::printf("other_threads_cpu_s: %.4f\n", other_threads_cpu_s());
  return 0;
}
