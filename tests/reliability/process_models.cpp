// Process models other than a plain fork: posix_spawn, vfork+exec, a daemon (double fork + setsid, the
// parent exits first) and threads that start and end while others allocate. Each process that touches CUDA
// leaks a known number of bytes and says so; the test checks that each has its own trace with exactly that.
// Runs on the simulated runtime (real CUDA cannot be used in a forked child once initialized).
// Usage: process_models spawn|vfork|daemon RESULT_FILE|thread-churn|child BYTES
// Output: "<role> pid=P leaked_bytes=N leaked_allocations=M" per process (the daemon writes its line to
// RESULT_FILE, then "done", since its stdout is not waited for), "thread-churn allocations=A frees=F ...".
#include <cuda_runtime.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

#define CHECK(call)                                                                                \
  do {                                                                                             \
    cudaError_t err = (call);                                                                      \
    if (err != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err)); \
      std::_Exit(1);                                                                               \
    }                                                                                              \
  } while (0)

// Leaks `bytes` in one allocation after a few allocate/free pairs; returns the line the process prints.
std::string leak(const char* role, size_t bytes) {
  for (int i = 0; i < 10; ++i) {
    void* p = nullptr;
    CHECK(cudaMalloc(&p, 512 + i));
    CHECK(cudaFree(p));
  }
  void* kept = nullptr;
  CHECK(cudaMalloc(&kept, bytes));
  char line[160];
  std::snprintf(line, sizeof line, "%s pid=%d leaked_bytes=%zu leaked_allocations=1\n", role,
                static_cast<int>(getpid()), bytes);
  return line;
}

void say(const std::string& line) {
  std::fputs(line.c_str(), stdout);
  std::fflush(stdout);
}

int wait_for(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int run_spawn(const char* self) {
  say(leak("parent", 1 << 20));
  std::string bytes = std::to_string(3 * 4096);
  char* argv[] = {const_cast<char*>(self), const_cast<char*>("child"), bytes.data(), nullptr};
  pid_t pid = 0;
  if (int err = posix_spawn(&pid, self, nullptr, nullptr, argv, environ); err != 0) {
    std::fprintf(stderr, "posix_spawn: %s\n", std::strerror(err));
    return 1;
  }
  return wait_for(pid);
}

int run_vfork(const char* self) {
  say(leak("parent", 1 << 20));
  std::string bytes = std::to_string(5 * 4096);
  char* argv[] = {const_cast<char*>(self), const_cast<char*>("child"), bytes.data(), nullptr};
  pid_t exec_child = vfork();
  if (exec_child == 0) {
    execv(self, argv);
    _exit(127);
  }
  // A vfork child that never execs: it shares our memory until it exits and must leave no trace.
  pid_t exit_child = vfork();
  if (exit_child == 0) _exit(7);
  if (exec_child < 0 || exit_child < 0) return 1;
  int first = wait_for(exec_child);
  int second = wait_for(exit_child);
  std::printf("exec child exit=%d, exiting child exit=%d\n", first, second);
  return first == 0 && second == 7 ? 0 : 1;
}

// The classic daemon: fork, the child starts a session and forks again, the middle process exits, and the
// original parent exits at once without waiting: the daemon outlives the process that `run` waits for.
int run_daemon(const char* result_file) {
  say(leak("parent", 1 << 20));
  pid_t first = fork();
  if (first < 0) return 1;
  if (first > 0) return 0;  // the original parent exits first (normally: exit handlers run)
  setsid();
  pid_t second = fork();
  if (second < 0) _exit(1);
  if (second > 0) std::exit(0);  // the middle process, which never touched CUDA after the fork
  // The daemon: wait until the original parent is gone, then work.
  int fd = open(result_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) _exit(1);
  for (int i = 0; i < 500 && kill(getppid(), 0) == 0 && getppid() != 1; ++i) usleep(10000);
  std::string line = leak("daemon", 7 * 4096) + "done\n";
  if (write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(1);
  close(fd);
  return 0;
}

int run_thread_churn() {
  constexpr int kRounds = 40, kThreads = 8, kPairs = 100;
  std::atomic<size_t> leaked{0};
  std::atomic<bool> stop{false};
  // One long-lived thread allocates throughout while the others come and go.
  std::thread steady([&] {
    while (!stop.load()) {
      void* p = nullptr;
      CHECK(cudaMalloc(&p, 256));
      CHECK(cudaFree(p));
    }
  });
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, round, t] {
        for (int i = 0; i < kPairs; ++i) {
          void* p = nullptr;
          CHECK(cudaMalloc(&p, 1024 + i));
          CHECK(cudaFree(p));
        }
        size_t bytes = static_cast<size_t>(round * kThreads + t + 1) * 16;
        void* kept = nullptr;
        CHECK(cudaMalloc(&kept, bytes));
        leaked += bytes;
      });
    }
    for (auto& thread : threads) thread.join();
  }
  stop = true;
  steady.join();
  std::printf("thread-churn threads=%d leaked_bytes=%zu leaked_allocations=%d\n", kRounds * kThreads, leaked.load(),
              kRounds * kThreads);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "spawn") return run_spawn(argv[0]);
  if (mode == "vfork") return run_vfork(argv[0]);
  if (mode == "daemon" && argc > 2) return run_daemon(argv[2]);
  if (mode == "thread-churn") return run_thread_churn();
  if (mode == "child" && argc > 2) {
    say(leak("child", std::strtoull(argv[2], nullptr, 10)));
    return 0;
  }
  std::fprintf(stderr, "usage: process_models spawn|vfork|daemon RESULT_FILE|thread-churn|child BYTES\n");
  return 2;
}
