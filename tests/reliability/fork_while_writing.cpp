// Forks many times while another thread allocates without pause, so that the fork often lands while the
// recorder's writer thread is in the middle of writing a batch (it holds its lock then). Each child
// allocates once, prints what it leaked and exits normally: it must not hang and must write its own trace.
// Usage: fork_while_writing [forks=50]
// Output: one line per child "child pid=P leaked_bytes=N", then
// "forks=F median_fork_us=M max_fork_us=X failed_children=C" (fork() as the parent saw it: with the profiler
// it includes waiting for the writer's batch in progress, in the atfork handler).
#include <cuda_runtime.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace {

#define CHECK(call)                                                                                \
  do {                                                                                             \
    cudaError_t err = (call);                                                                      \
    if (err != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err)); \
      std::_Exit(1);                                                                               \
    }                                                                                              \
  } while (0)

// The simulated runtime, like any library without fork handlers, must not be forked while another thread is
// inside it (its heap lock would stay locked in the child; real CUDA cannot be used in a forked child at
// all). This lock keeps the allocating thread out of cudaMalloc/cudaFree across fork. The fork handlers of
// gpumemtrace run after ours (registered earlier, prepare handlers run in reverse), so the allocating thread
// never waits on this lock while holding the recorder's: its lock is taken and given back inside the hook.
std::mutex g_cuda_mutex;
std::atomic<bool> g_stop{false};

void allocate_continuously() {
  for (unsigned i = 0; !g_stop.load(std::memory_order_relaxed); ++i) {
    std::lock_guard lock(g_cuda_mutex);
    void* p = nullptr;
    CHECK(cudaMalloc(&p, 256 + (i % 17) * 512));
    CHECK(cudaFree(p));
  }
}

__attribute__((noinline)) void child_work(int index) {
  size_t bytes = static_cast<size_t>(index + 1) * 4096;
  void* p = nullptr;
  CHECK(cudaMalloc(&p, bytes));  // leaked: the child's trace must show exactly this
  std::printf("child pid=%d leaked_bytes=%zu\n", static_cast<int>(getpid()), bytes);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int forks = argc > 1 ? std::atoi(argv[1]) : 50;
  pthread_atfork([] { g_cuda_mutex.lock(); }, [] { g_cuda_mutex.unlock(); }, [] { g_cuda_mutex.unlock(); });
  CHECK(cudaFree(nullptr));
  std::thread allocator(allocate_continuously);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let the writer get busy

  int failed_children = 0;
  std::vector<pid_t> children;
  std::vector<long> fork_us;
  for (int i = 0; i < forks; ++i) {
    std::fflush(stdout);  // nothing buffered may be printed twice by the child
    auto before = std::chrono::steady_clock::now();
    pid_t pid = fork();
    if (pid < 0) {
      std::perror("fork");
      return 1;
    }
    if (pid == 0) {
      child_work(i);
      std::exit(0);  // a normal exit: the child's trace is flushed and completed by atexit
    }
    fork_us.push_back(static_cast<long>(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - before).count()));
    children.push_back(pid);
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + (i * 7) % 20));
  }
  for (pid_t pid : children) {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed_children;
  }
  g_stop = true;
  allocator.join();
  std::sort(fork_us.begin(), fork_us.end());
  std::printf("forks=%d median_fork_us=%ld max_fork_us=%ld failed_children=%d\n", forks,
              fork_us.empty() ? 0 : fork_us[fork_us.size() / 2], fork_us.empty() ? 0 : fork_us.back(), failed_children);
  return failed_children == 0 ? 0 : 1;
}
